//! The health probe's request: the upstream's `/version`.

use std::time::Duration;

use kube::Client;

use super::failure::MirrorError;

/// Asks the upstream for its `/version`, within `timeout` for everything. A request that fails
/// before any answer (the pooled connection it was given had closed, as after the hub or the
/// upstream was paused) is sent once more: the client's pool has let that connection go, and
/// a connection closed while idle says nothing about the upstream. An upstream that is down
/// fails the second request too; one that answers with an error is not asked again.
pub async fn ask_version(client: &Client, timeout: Duration) -> Result<(), MirrorError> {
    let ask = async {
        match client.apiserver_version().await {
            Err(kube::Error::Service(_) | kube::Error::HyperError(_)) => {
                tracing::debug!("the probe got no answer; sending it once more");
                client.apiserver_version().await
            }
            answer => answer,
        }
    };
    match tokio::time::timeout(timeout, ask).await {
        Ok(answer) => answer.map(|_| ()).map_err(MirrorError::from),
        Err(_) => Err(MirrorError::Timeout(timeout)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use http_body_util::Full;
    use hyper::body::Bytes;

    use super::*;

    type Answer = Result<http::Response<Full<Bytes>>, std::io::Error>;

    /// What the stand-in upstream does with a request: answers (or fails) `after` a while,
    /// or with no answer, never.
    struct Reply {
        after: Duration,
        answer: Option<Answer>,
    }

    impl Reply {
        fn after(self, after: Duration) -> Self {
            Reply { after, ..self }
        }
    }

    /// A kube client whose requests go to `reply` (called with the request's number from 0)
    /// instead of a connection: stands in for an upstream and the connections to it.
    fn client_answering(
        reply: impl Fn(usize) -> Reply + Send + Sync + 'static,
    ) -> (Client, Arc<AtomicUsize>) {
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = asked.clone();
        let reply = Arc::new(reply);
        let service = tower::service_fn(move |_: http::Request<kube::client::Body>| {
            let Reply { after, answer } = reply(counter.fetch_add(1, Ordering::SeqCst));
            async move {
                tokio::time::sleep(after).await;
                match answer {
                    Some(answer) => answer,
                    None => std::future::pending().await,
                }
            }
        });
        (Client::new(service, "default"), asked)
    }

    fn version() -> Reply {
        let body = r#"{"major":"1","minor":"31","gitVersion":"v1.31.0","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":"linux/amd64"}"#;
        let answer = Ok(http::Response::new(Full::new(Bytes::from(body))));
        Reply {
            after: Duration::ZERO,
            answer: Some(answer),
        }
    }

    fn closed() -> Reply {
        let e = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection closed");
        Reply {
            after: Duration::ZERO,
            answer: Some(Err(e)),
        }
    }

    fn never() -> Reply {
        Reply {
            after: Duration::ZERO,
            answer: None,
        }
    }

    const TIMEOUT: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn a_probe_sent_on_a_closed_connection_is_sent_again() {
        let (client, asked) = client_answering(|n| if n == 0 { closed() } else { version() });
        ask_version(&client, TIMEOUT)
            .await
            .expect("the second request is answered");
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_probe_fails_when_the_second_request_fails_too() {
        let (client, asked) = client_answering(|_| closed());
        let e = ask_version(&client, TIMEOUT).await.unwrap_err();
        assert!(
            matches!(e, MirrorError::Kube(kube::Error::Service(_))),
            "{e}"
        );
        assert_eq!(asked.load(Ordering::SeqCst), 2, "sent twice, no more");
    }

    #[tokio::test]
    async fn an_answered_probe_is_not_sent_again() {
        let (client, asked) = client_answering(|_| {
            let mut refused = http::Response::new(Full::new(Bytes::from(
                r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"down","reason":"InternalError","code":500}"#,
            )));
            *refused.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
            Reply {
                answer: Some(Ok(refused)),
                ..never()
            }
        });
        let e = ask_version(&client, TIMEOUT).await.unwrap_err();
        assert!(matches!(e, MirrorError::Kube(kube::Error::Api(_))), "{e}");
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }

    /// The clock is paused: it jumps ahead whenever every task waits, so the test takes no
    /// real time and its times are exact.
    #[tokio::test(start_paused = true)]
    async fn one_timeout_bounds_both_requests() {
        // The first fails after 3 s, the second never answers: the probe fails at 5 s, where
        // a timeout per request would wait 8.
        let (client, asked) = client_answering(|n| match n {
            0 => closed().after(Duration::from_secs(3)),
            _ => never(),
        });
        let start = tokio::time::Instant::now();
        let e = ask_version(&client, TIMEOUT).await.unwrap_err();
        assert!(matches!(e, MirrorError::Timeout(t) if t == TIMEOUT), "{e}");
        assert_eq!(start.elapsed(), TIMEOUT);
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }
}
