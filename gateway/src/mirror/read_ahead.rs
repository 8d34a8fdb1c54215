//! A watch stream read by a task of its own, a bounded number of items ahead of its consumer.
//!
//! A mirror's watch writes what arrived together as one chunk and waits for it to commit.
//! Read inline, the stream is idle during that wait, and what it yields next is only what the
//! connection had already handed over: a few events, one small write batch each. Read ahead,
//! events keep arriving and being decoded while a chunk commits, so the next chunk is as large
//! as what came meanwhile and the writer commits fewer, larger batches.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use futures::{Stream, StreamExt};
use tokio::sync::mpsc;

use super::progress::AbortOnDrop;

/// `source`'s items, in order, read up to `ahead` items before they are asked for. The
/// reading task ends with the source, or when this is dropped.
pub struct ReadAhead<T> {
    items: mpsc::Receiver<T>,
    _reader: AbortOnDrop,
}

impl<T: Send + 'static> ReadAhead<T> {
    pub fn new<S>(source: S, ahead: usize) -> Self
    where
        S: Stream<Item = T> + Send + 'static,
    {
        let (tx, items) = mpsc::channel(ahead.max(1));
        let reader = tokio::spawn(async move {
            let mut source = std::pin::pin!(source);
            while let Some(item) = source.next().await {
                if tx.send(item).await.is_err() {
                    return;
                }
            }
        });
        ReadAhead {
            items,
            _reader: AbortOnDrop(reader),
        }
    }
}

impl<T> Stream for ReadAhead<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.items.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        },
        time::Duration,
    };

    use super::*;

    /// A source of `0..n` that counts the items taken from it.
    fn counted(n: usize) -> (impl Stream<Item = usize> + Send + 'static, Arc<AtomicUsize>) {
        let taken = Arc::new(AtomicUsize::new(0));
        let counter = taken.clone();
        let source = futures::stream::iter(0..n).inspect(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        (source, taken)
    }

    async fn until(what: &str, check: impl Fn() -> bool) {
        tokio::time::timeout(Duration::from_secs(5), async {
            while !check() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
    }

    #[tokio::test]
    async fn items_arrive_in_order_and_end_with_the_source() {
        let (source, _) = counted(100);
        let read: Vec<usize> = ReadAhead::new(source, 8).collect().await;
        assert_eq!(read, (0..100).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn the_source_is_read_while_nothing_is_asked_for_up_to_the_bound() {
        let (source, taken) = counted(100);
        let mut ahead = ReadAhead::new(source, 8);
        // Eight items wait in the channel and the reader holds a ninth it cannot hand over.
        until("eight items read ahead", || {
            taken.load(Ordering::SeqCst) >= 9
        })
        .await;
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        assert_eq!(taken.load(Ordering::SeqCst), 9, "no more than the bound");
        assert_eq!(ahead.next().await, Some(0));
        until("one more read", || taken.load(Ordering::SeqCst) == 10).await;
    }

    #[tokio::test]
    async fn dropping_it_stops_the_reader() {
        let (tx, rx) = mpsc::channel::<usize>(1);
        let source = tokio_stream::wrappers::ReceiverStream::new(rx);
        let ahead = ReadAhead::new(source, 4);
        tx.send(1).await.unwrap();
        drop(ahead);
        until("the reader to drop the source", || tx.is_closed()).await;
    }
}
