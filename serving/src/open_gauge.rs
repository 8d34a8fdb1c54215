//! A gauge of answers still streaming (open watches): one more while an answer's body is
//! alive, one less once it is dropped, whether it ended or the client went away.

use axum::body::Body;
use http_body_util::BodyExt;
use prometheus::IntGauge;

/// `body`, counted in `gauge` for as long as it lives.
pub fn counted_while_open(body: Body, gauge: IntGauge) -> Body {
    gauge.inc();
    let open = Open(gauge);
    // The guard lives in the body's frame mapping, so it goes when the body does.
    Body::new(body.map_frame(move |frame| {
        let _ = &open;
        frame
    }))
}

/// One open answer: the gauge goes down when it is dropped.
struct Open(IntGauge);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gauge_counts_the_body_while_it_lives() {
        let gauge = IntGauge::new("open", "open").unwrap();
        let body = counted_while_open(Body::from("x"), gauge.clone());
        assert_eq!(gauge.get(), 1);
        drop(body);
        assert_eq!(gauge.get(), 0);
    }
}
