//! A connection's reading side: it reads frames one at a time, and can read the next frame
//! ahead while the requests before it are still being served.
//!
//! A read ahead is never abandoned half way: [`read_frame`] consumes the size prefix before
//! the body arrives, so a dropped read would lose the frame. The read ahead therefore owns the
//! read half and the buffer until it ends, and whoever reads next takes its result. A read
//! ahead that finds nothing to read costs nothing: it waits on the socket as the next ordinary
//! read would have.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use super::frame::{read_frame, FrameError};
use super::idle::{unless_stalled, Activity, IdleTimeout, NotingReads};
use super::memory_pool::{MemoryPool, Reservation};
use super::tls::{Stream, StreamReader, StreamWriter};

/// What reading one frame came to: the frame and its memory reservation, a framing error, or
/// the idle timeout.
pub(crate) type FrameRead = Result<Result<(Bytes, Reservation), FrameError>, IdleTimeout>;

type ReadAhead = Pin<Box<dyn Future<Output = (FrameRead, StreamReader, BytesMut)> + Send>>;

enum State {
    Idle(StreamReader, BytesMut),
    Reading(ReadAhead),
    Read(FrameRead, StreamReader, BytesMut),
    /// Only between two of the states above, inside one method.
    Moving,
}

pub(crate) struct FrameSource {
    state: State,
}

impl FrameSource {
    pub(crate) fn new(reader: StreamReader) -> Self {
        Self {
            state: State::Idle(reader, BytesMut::new()),
        }
    }

    /// The next frame: the one read ahead, else one read now. `max_size` and `idle_timeout`
    /// apply to a read started here.
    pub(crate) async fn next(
        &mut self,
        max_size: i32,
        memory: &Arc<MemoryPool>,
        idle_timeout: Duration,
    ) -> FrameRead {
        if let State::Idle(reader, buffer) = &mut self.state {
            return read_one(reader, buffer, max_size, memory, idle_timeout).await;
        }
        self.ahead().await;
        match std::mem::replace(&mut self.state, State::Moving) {
            State::Read(read, reader, buffer) => {
                self.state = State::Idle(reader, buffer);
                read
            }
            other => {
                self.state = other;
                Ok(Err(FrameError::Io(std::io::Error::other(
                    "a read ahead ended without its frame",
                ))))
            }
        }
    }

    /// Starts reading the next frame ahead, unless a read ahead is under way or done.
    pub(crate) fn start_ahead(
        &mut self,
        max_size: i32,
        memory: Arc<MemoryPool>,
        idle_timeout: Duration,
    ) {
        self.state = match std::mem::replace(&mut self.state, State::Moving) {
            State::Idle(mut reader, mut buffer) => State::Reading(Box::pin(async move {
                let read =
                    read_one(&mut reader, &mut buffer, max_size, &memory, idle_timeout).await;
                (read, reader, buffer)
            })),
            other => other,
        };
    }

    /// Waits for the read ahead to end (at once when none is under way). Dropping this
    /// future leaves the read ahead where it was.
    pub(crate) async fn ahead(&mut self) {
        if let State::Reading(read) = &mut self.state {
            let (read, reader, buffer) = read.as_mut().await;
            self.state = State::Read(read, reader, buffer);
        }
    }

    /// Whether a frame read ahead waits to be taken.
    pub(crate) fn has_read(&self) -> bool {
        matches!(self.state, State::Read(..))
    }

    /// The frame read ahead, when there is one and `wanted` accepts it; anything else stays
    /// for [`FrameSource::next`].
    pub(crate) fn take_if(
        &mut self,
        wanted: impl FnOnce(&Bytes) -> bool,
    ) -> Option<(Bytes, Reservation)> {
        let State::Read(Ok(Ok((frame, _))), ..) = &self.state else {
            return None;
        };
        if !wanted(frame) {
            return None;
        }
        match std::mem::replace(&mut self.state, State::Moving) {
            State::Read(Ok(Ok(read)), reader, buffer) => {
                self.state = State::Idle(reader, buffer);
                Some(read)
            }
            other => {
                self.state = other;
                None
            }
        }
    }

    /// Whether bytes past the last frame read wait in the buffer (none while reading ahead).
    pub(crate) fn has_buffered_bytes(&self) -> bool {
        match &self.state {
            State::Idle(_, buffer) | State::Read(_, _, buffer) => !buffer.is_empty(),
            State::Reading(_) | State::Moving => false,
        }
    }

    /// The whole stream again, when no read ahead holds its read half.
    pub(crate) fn into_stream(self, writer: StreamWriter) -> Option<Stream> {
        match self.state {
            State::Idle(reader, _) => reader.unsplit(writer),
            _ => None,
        }
    }
}

/// One frame, or the idle timeout: `idle_timeout` with no byte read, counted from the last
/// byte, so a large request on a slow link is not cut off while its bytes still arrive.
async fn read_one(
    reader: &mut StreamReader,
    buffer: &mut BytesMut,
    max_size: i32,
    memory: &Arc<MemoryPool>,
    idle_timeout: Duration,
) -> FrameRead {
    let activity = Activity::new();
    let mut noting = NotingReads {
        inner: reader,
        activity: &activity,
    };
    unless_stalled(
        read_frame(&mut noting, buffer, max_size, memory),
        &activity,
        idle_timeout,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    const IDLE: Duration = Duration::from_secs(30);

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        frame
    }

    /// A connected pair on loopback: the client's end, and the server's split in two.
    async fn connected() -> (TcpStream, FrameSource, StreamWriter) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let (client, accepted) = tokio::join!(TcpStream::connect(address), listener.accept());
        let (server, _) = accepted.expect("accept");
        let (reader, writer) = Stream::Plain(server).split();
        (client.expect("connect"), FrameSource::new(reader), writer)
    }

    async fn next(frames: &mut FrameSource) -> Bytes {
        match frames.next(1 << 20, &MemoryPool::new(-1), IDLE).await {
            Ok(Ok((frame, _))) => frame,
            other => panic!("no frame: {:?}", other.map(|r| r.map(|(f, _)| f))),
        }
    }

    #[tokio::test]
    async fn a_frame_read_ahead_is_taken_or_left_for_next() {
        let (mut client, mut frames, writer) = connected().await;
        client.write_all(&framed(b"first")).await.expect("write");
        client.write_all(&framed(b"second")).await.expect("write");
        frames.start_ahead(1 << 20, MemoryPool::new(-1), IDLE);
        frames.ahead().await;
        assert!(frames.has_read());
        assert!(frames.take_if(|frame| &frame[..] == b"other").is_none());
        let taken = frames.take_if(|frame| &frame[..] == b"first");
        assert_eq!(
            taken.map(|(frame, _)| frame).as_deref(),
            Some(&b"first"[..])
        );
        frames.start_ahead(1 << 20, MemoryPool::new(-1), IDLE);
        frames.ahead().await;
        assert!(frames.take_if(|_| false).is_none(), "a refused frame stays");
        assert_eq!(&next(&mut frames).await[..], b"second");
        assert!(
            frames.into_stream(writer).is_some(),
            "the halves join again"
        );
    }

    #[tokio::test]
    async fn a_read_ahead_left_half_way_loses_no_byte() {
        let (mut client, mut frames, _writer) = connected().await;
        let whole = framed(&[7u8; 100_000]);
        client.write_all(&whole[..50_000]).await.expect("write");
        frames.start_ahead(1 << 20, MemoryPool::new(-1), IDLE);
        // Polled until it has taken what arrived, then left (as a served Produce leaves it).
        for _ in 0..100 {
            assert!(
                frames.ahead().now_or_never().is_none(),
                "half a frame is not a frame"
            );
            tokio::task::yield_now().await;
        }
        client.write_all(&whole[50_000..]).await.expect("write");
        client.write_all(&framed(b"after")).await.expect("write");
        assert_eq!(&next(&mut frames).await[..], &[7u8; 100_000][..]);
        assert_eq!(&next(&mut frames).await[..], b"after");
    }
}
