//! `connections.max.idle.ms` on both directions of a connection.
//!
//! Kafka's `Selector` marks a connection active whenever it reads or writes bytes, and closes
//! one that did neither for `connections.max.idle.ms`, with a response half written or not: a
//! client that stops reading its answers is closed like one that stops sending. Here a read or
//! a write runs under [`unless_stalled`], through [`NotingReads`] or [`NotingWrites`], which
//! note each byte moved on an [`Activity`] clock.

use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// Nothing moved either way for `connections.max.idle.ms`.
#[derive(Debug)]
pub(crate) struct IdleTimeout;

/// When bytes last moved, in milliseconds after `start`.
pub(crate) struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    pub(crate) fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn note(&self) {
        let elapsed = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(elapsed, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// `work`'s output, or [`IdleTimeout`] once `idle_timeout` passed since bytes last moved on `activity`
/// (counted from its start when nothing moved).
pub(crate) async fn unless_stalled<F: Future>(
    work: F,
    activity: &Activity,
    idle_timeout: Duration,
) -> Result<F::Output, IdleTimeout> {
    tokio::pin!(work);
    // Most reads of a frame already buffered and most writes finish at their first poll: they
    // need no timer.
    let first = std::future::poll_fn(|cx| Poll::Ready(work.as_mut().poll(cx))).await;
    if let Poll::Ready(output) = first {
        return Ok(output);
    }
    let mut deadline = activity.last() + idle_timeout;
    loop {
        tokio::select! {
            biased;
            output = &mut work => return Ok(output),
            () = tokio::time::sleep_until(deadline) => {
                let due = activity.last() + idle_timeout;
                if due <= deadline {
                    return Err(IdleTimeout);
                }
                deadline = due;
            }
        }
    }
}

/// A reader that notes every read that delivered bytes.
pub(crate) struct NotingReads<'a, R> {
    pub(crate) inner: &'a mut R,
    pub(crate) activity: &'a Activity,
}

impl<R: AsyncRead + Unpin> AsyncRead for NotingReads<'_, R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut *self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.note();
        }
        polled
    }
}

/// A writer that notes every write that took bytes; vectored writes pass through (a Fetch
/// answer goes out as parts with `writev`).
pub(crate) struct NotingWrites<'a, W> {
    pub(crate) inner: &'a mut W,
    pub(crate) activity: &'a Activity,
}

impl<W> NotingWrites<'_, W> {
    fn noted(&self, polled: Poll<std::io::Result<usize>>) -> Poll<std::io::Result<usize>> {
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            self.activity.note();
        }
        polled
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for NotingWrites<'_, W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut *self.inner).poll_write(cx, buf);
        self.noted(polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut *self.inner).poll_write_vectored(cx, bufs);
        self.noted(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    /// Both ends of a loopback connection: (server, client).
    async fn connected() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (accepted, connected) = tokio::join!(listener.accept(), TcpStream::connect(address));
        (accepted.unwrap().0, connected.unwrap())
    }

    /// A peer that never reads: the write stalls once the socket buffers are full and is given
    /// up after the idle timeout; a peer that reads slowly keeps it going.
    #[tokio::test]
    async fn a_write_the_peer_never_takes_times_out() {
        let (mut server, _client) = connected().await;
        let activity = Activity::new();
        let answer = vec![7u8; 64 << 20];
        let mut writer = NotingWrites {
            inner: &mut server,
            activity: &activity,
        };
        let written = unless_stalled(
            writer.write_all(&answer),
            &activity,
            Duration::from_millis(300),
        )
        .await;
        assert!(written.is_err(), "64 MiB never read cannot all be written");
    }

    #[tokio::test]
    async fn a_read_that_keeps_moving_is_not_idle() {
        let (mut server, mut client) = connected().await;
        let sending = tokio::spawn(async move {
            for _ in 0..6 {
                client.write_all(b"x").await.unwrap();
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
        let activity = Activity::new();
        let mut reader = NotingReads {
            inner: &mut server,
            activity: &activity,
        };
        let mut six = [0u8; 6];
        let read = unless_stalled(
            tokio::io::AsyncReadExt::read_exact(&mut reader, &mut six),
            &activity,
            Duration::from_secs(1),
        )
        .await;
        assert!(matches!(read, Ok(Ok(6))), "{read:?}");
        sending.await.unwrap();
    }
}
