//! A watch stream read by a task of its own, a bounded number of items ahead of its consumer.
//!
//! A mirror's watch writes what arrived together as one chunk and waits for it to commit.
//! Read inline, the stream is idle during that wait, and what it yields next is only what the
//! connection had already handed over: a few events, one small write batch each. Read ahead,
//! events keep being decoded while a chunk commits, up to the bound, so the next chunk is ready
//! with up to that many (more when the reader runs beside the consumer), each upstream's watch
//! keeps one chunk committing, and the writer commits fewer, larger batches.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use futures::{Stream, StreamExt};
use tokio::sync::mpsc;

use super::progress::AbortOnDrop;

/// `source`'s items, in order, read up to `ahead` items before they are asked for (and one
/// more, held by the reader until there is room). The reading task ends with the source, or
/// when this is dropped; a panic in the source is raised again where the items are read, as
/// it was when the source was read there.
pub struct ReadAhead<T> {
    items: mpsc::Receiver<T>,
    reader: AbortOnDrop,
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
            reader: AbortOnDrop(reader),
        }
    }
}

impl<T> Stream for ReadAhead<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if let Some(item) = std::task::ready!(self.items.poll_recv(cx)) {
            return Poll::Ready(Some(item));
        }
        // The reader is done: the source ended, or it panicked (the channel closes as the
        // panic unwinds, before the task's outcome is recorded, so that is waited for).
        match std::task::ready!(Pin::new(&mut self.reader.0).poll(cx)) {
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            _ => Poll::Ready(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use super::*;
    use gpustack_tests::wait::until;

    /// How long the reader may take to catch up.
    const SOON: std::time::Duration = std::time::Duration::from_secs(10);

    /// A source of `0..n` that counts the items taken from it.
    fn counted(n: usize) -> (impl Stream<Item = usize> + Send + 'static, Arc<AtomicUsize>) {
        let taken = Arc::new(AtomicUsize::new(0));
        let counter = taken.clone();
        let source = futures::stream::iter(0..n).inspect(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        (source, taken)
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
        until("eight items read ahead", SOON, || {
            std::future::ready((taken.load(Ordering::SeqCst) >= 9).then_some(()))
        })
        .await;
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        assert_eq!(taken.load(Ordering::SeqCst), 9, "no more than the bound");
        assert_eq!(ahead.next().await, Some(0));
        until("one more read", SOON, || {
            std::future::ready((taken.load(Ordering::SeqCst) == 10).then_some(()))
        })
        .await;
    }

    #[tokio::test]
    async fn dropping_it_stops_the_reader() {
        let (tx, rx) = mpsc::channel::<usize>(1);
        let source = tokio_stream::wrappers::ReceiverStream::new(rx);
        let ahead = ReadAhead::new(source, 4);
        // The reader runs and waits on the source, which has nothing: only stopping the
        // reader lets the source go.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!tx.is_closed());
        drop(ahead);
        until("the reader to drop the source", SOON, || {
            std::future::ready(tx.is_closed().then_some(()))
        })
        .await;
    }

    #[tokio::test]
    async fn a_panic_in_the_source_is_raised_where_it_is_read() {
        let source = futures::stream::iter(0..3).map(|i| {
            assert!(i < 2, "the source fails at {i}");
            i
        });
        let reading = tokio::spawn(ReadAhead::new(source, 8).collect::<Vec<usize>>());
        let e = reading
            .await
            .expect_err("the panic reaches the reader's reader");
        let message = e.into_panic();
        let message = message
            .downcast_ref::<String>()
            .expect("a formatted message");
        assert!(message.contains("the source fails at 2"), "{message}");
    }
}
