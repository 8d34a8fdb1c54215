//! Logging and tracing: klog-style flags mapped onto tracing-subscriber, to standard error, with
//! OpenTelemetry export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (and then W3C trace context
//! propagated across hops: docs/observability.md).

use std::io::Write;

use anyhow::Context;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::{propagation::TraceContextPropagator, trace::SdkTracerProvider};
use tracing::{Level, Subscriber};
use tracing_subscriber::{
    EnvFilter, Layer,
    filter::{FilterExt, LevelFilter, filter_fn},
    layer::SubscriberExt,
    registry::LookupSpan,
    util::SubscriberInitExt,
};

use crate::cli::args::{BacktraceAt, GlobalFlags};

/// klog verbosity to a tracing level: 0 info, 1-2 debug, 3 and above trace.
pub fn level_for(verbosity: u8) -> LevelFilter {
    match verbosity {
        0 => LevelFilter::INFO,
        1 | 2 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    }
}

/// The filter for `-v` and `--vmodule`: a base level, and one directive per target.
pub fn filter_directives(flags: &GlobalFlags) -> String {
    let mut directives = vec![level_for(flags.verbosity).to_string().to_lowercase()];
    // Dependencies stay at info unless asked for by name: their debug output drowns ours.
    if flags.verbosity > 0 {
        for noisy in [
            "hyper",
            "h2",
            "tower",
            "rustls",
            "reqwest",
            "opentelemetry",
            "sqlx",
        ] {
            directives.push(format!("{noisy}=info"));
        }
    }
    for (target, level) in &flags.vmodule.0 {
        directives.push(format!(
            "{target}={}",
            level_for(*level).to_string().to_lowercase()
        ));
    }
    directives.join(",")
}

/// Keeps exporters alive; flushes spans when dropped.
pub struct LoggingGuard {
    tracer_provider: Option<SdkTracerProvider>,
}

impl Drop for LoggingGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.tracer_provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("warning: flushing OpenTelemetry spans failed: {e}");
        }
    }
}

/// Whether a callsite is one of this project's spans, which the exporter takes down to `debug`
/// whatever `-v` says: a span per request, reconcile, admission review, gRPC call, mirror sync
/// and store commit (dependencies' spans, a kube client's with its URL, are left out).
fn exported_span(meta: &tracing::Metadata<'_>) -> bool {
    meta.is_span() && *meta.level() <= Level::DEBUG && meta.target().starts_with("gpustack")
}

/// Installs the global subscriber. Each layer filters for itself: the log takes what `-v` and
/// `--vmodule` say, the exporter that and this project's spans, so that with no exporter and no
/// `-v` the spans are disabled at their callsites and cost nothing.
pub fn init(flags: &GlobalFlags) -> anyhow::Result<LoggingGuard> {
    let directives = filter_directives(flags);
    let filter = || EnvFilter::try_new(&directives).context("building the log filter");
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let fmt = if flags.skip_headers {
        fmt.without_time()
            .with_level(false)
            .with_target(false)
            .with_filter(filter()?)
            .boxed()
    } else {
        fmt.with_file(flags.add_dir_header)
            .with_line_number(flags.add_dir_header)
            .with_filter(filter()?)
            .boxed()
    };
    let mut layers = vec![fmt];
    let tracer_provider = match std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
        Ok(endpoint) if !endpoint.is_empty() => Some(otlp_provider()?),
        _ => None,
    };
    if let Some(p) = &tracer_provider {
        // Requests carry W3C trace context in and out (gpustack_serving::trace_context) only
        // while spans are exported: until then the global propagator is the no-op one.
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let spans = filter_fn(exported_span).with_max_level_hint(Level::DEBUG);
        layers.push(
            tracing_opentelemetry::layer()
                .with_tracer(p.tracer("gpustack-operator"))
                .with_filter(filter()?.or(spans))
                .boxed(),
        );
    }
    if let Some(at) = flags.log_backtrace_at.clone() {
        layers.push(BacktraceLayer(at).with_filter(filter()?).boxed());
    }
    tracing_subscriber::registry()
        .with(layers)
        .try_init()
        .context("installing the log subscriber")?;
    if !flags.logtostderr {
        tracing::warn!("--logtostderr=false has no effect: logs always go to standard error");
    }
    Ok(LoggingGuard { tracer_provider })
}

/// OTLP over HTTP/protobuf; the exporter reads the endpoint and headers from the standard
/// `OTEL_EXPORTER_OTLP_*` variables.
fn otlp_provider() -> anyhow::Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .context("building the OTLP span exporter")?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("gpustack-operator")
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// klog's `--log_backtrace_at=file:line`: a backtrace after the event logged there.
struct BacktraceLayer(BacktraceAt);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for BacktraceLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        let at_file = meta
            .file()
            .is_some_and(|f| f == self.0.file || f.ends_with(&format!("/{}", self.0.file)));
        if at_file && meta.line() == Some(self.0.line) && *meta.level() <= Level::TRACE {
            let trace = std::backtrace::Backtrace::force_capture();
            let _ = writeln!(
                std::io::stderr(),
                "backtrace at {}:{}:\n{trace}",
                self.0.file,
                self.0.line
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::VModule;

    fn flags(verbosity: u8, vmodule: Vec<(&str, u8)>) -> GlobalFlags {
        GlobalFlags {
            verbosity,
            vmodule: VModule(
                vmodule
                    .into_iter()
                    .map(|(t, l)| (t.to_owned(), l))
                    .collect(),
            ),
            logtostderr: true,
            add_dir_header: false,
            skip_headers: false,
            log_backtrace_at: None,
            print_cmdline: false,
        }
    }

    #[test]
    fn verbosity_maps_to_levels() {
        assert_eq!(filter_directives(&flags(0, vec![])), "info");
        assert!(filter_directives(&flags(2, vec![])).starts_with("debug,hyper=info"));
        assert_eq!(
            filter_directives(&flags(0, vec![("gpustack_apiserver::store", 3)])),
            "info,gpustack_apiserver::store=trace"
        );
        for d in filter_directives(&flags(3, vec![("x", 1)])).split(',') {
            assert!(
                d.parse::<tracing_subscriber::filter::Directive>().is_ok(),
                "{d}"
            );
        }
    }
}
