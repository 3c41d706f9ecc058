//! Reading one size-prefixed Kafka frame from a socket.
//!
//! The 4-byte size is checked against `socket.request.max.bytes` before any of the body is
//! buffered, so an oversized or negative size costs four bytes of memory, not its claim.

use bytes::{Buf, Bytes, BytesMut};
use gregor_metrics::CloseReason;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::memory_pool::{MemoryPool, Reservation};

/// Most bytes reserved per read while a body arrives; the buffer grows only as data does.
const READ_CHUNK: usize = 64 * 1024;

/// Why no frame could be read.
#[derive(Debug)]
pub enum FrameError {
    /// The peer closed the connection between frames.
    Closed,
    /// The peer closed the connection inside a frame.
    Truncated,
    /// The size prefix was negative.
    NegativeSize(i32),
    /// The size prefix exceeded the limit.
    TooLarge { size: i32, max: i32 },
    /// The socket failed.
    Io(std::io::Error),
}

impl FrameError {
    /// The metric label for closing the connection because of this error.
    pub fn close_reason(&self) -> CloseReason {
        match self {
            FrameError::Closed => CloseReason::ClientClosed,
            FrameError::Truncated => CloseReason::Truncated,
            FrameError::NegativeSize(_) => CloseReason::NegativeSize,
            FrameError::TooLarge { .. } => CloseReason::OversizedRequest,
            FrameError::Io(_) => CloseReason::IoError,
        }
    }
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Closed => write!(f, "connection closed by the client"),
            FrameError::Truncated => write!(f, "connection closed in the middle of a frame"),
            // Kafka's NetworkReceive wording.
            FrameError::NegativeSize(size) => write!(f, "Invalid receive (size = {size})"),
            FrameError::TooLarge { size, max } => {
                write!(f, "Invalid receive (size = {size} larger than {max})")
            }
            FrameError::Io(error) => write!(f, "socket error: {error}"),
        }
    }
}

/// Most bytes read ahead of the current frame: small frames (most requests) then arrive with
/// their size prefix in one read, instead of one read for the prefix and one for the body.
const READ_AHEAD: usize = 8 * 1024;

/// Reads one frame body (without its size prefix). `buffer` is kept between frames: it holds
/// what was read past the previous frame (at most [`READ_AHEAD`] bytes, or part of a pipelined
/// request). The body's size is reserved in `memory` before the rest of it is read (waiting
/// while the pool is used up); the reservation comes back with the frame and is held until the
/// request is done.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    buffer: &mut BytesMut,
    max_size: i32,
    memory: &std::sync::Arc<MemoryPool>,
) -> Result<(Bytes, Reservation), FrameError> {
    while buffer.len() < 4 {
        buffer.reserve(READ_AHEAD);
        let room = (buffer.capacity() - buffer.len()).min(READ_AHEAD);
        match (&mut *reader).take(room as u64).read_buf(buffer).await {
            Ok(0) if buffer.is_empty() => return Err(FrameError::Closed),
            Ok(0) => return Err(FrameError::Truncated),
            Ok(_) => {}
            Err(error) => return Err(FrameError::Io(error)),
        }
    }
    let size = i32::from_be_bytes([buffer[0], buffer[1], buffer[2], buffer[3]]);
    if size < 0 {
        return Err(FrameError::NegativeSize(size));
    }
    if size > max_size {
        return Err(FrameError::TooLarge {
            size,
            max: max_size,
        });
    }
    let size = size as usize;
    let reservation = memory.reserve(size).await;
    buffer.advance(4);
    if buffer.len() >= size {
        return Ok((buffer.split_to(size).freeze(), reservation));
    }
    if size > READ_CHUNK {
        // One allocation of exactly the frame: growing by doubling would copy the body and
        // hold up to three times its size. Pages of it become resident only as data arrives.
        let mut frame = BytesMut::with_capacity(size);
        frame.extend_from_slice(buffer);
        buffer.clear();
        read_exactly(reader, &mut frame, size, size).await?;
        return Ok((frame.freeze(), reservation));
    }
    read_exactly(reader, buffer, size, size + READ_AHEAD).await?;
    Ok((buffer.split_to(size).freeze(), reservation))
}

/// Reads into `buffer` until it holds `size` bytes, reading at most up to `limit` bytes in all
/// (what lies past `size` is the next frame's) and reserving at most [`READ_CHUNK`] at a time.
async fn read_exactly<R: AsyncRead + Unpin>(
    reader: &mut R,
    buffer: &mut BytesMut,
    size: usize,
    limit: usize,
) -> Result<(), FrameError> {
    while buffer.len() < size {
        buffer.reserve((size - buffer.len()).min(READ_CHUNK));
        let room = (buffer.capacity() - buffer.len()).min(limit - buffer.len());
        let read = (&mut *reader)
            .take(room as u64)
            .read_buf(buffer)
            .await
            .map_err(FrameError::Io)?;
        if read == 0 {
            return Err(FrameError::Truncated);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8], max: i32) -> Result<Bytes, FrameError> {
        let mut reader = bytes;
        read_frame(&mut reader, &mut BytesMut::new(), max, &MemoryPool::new(-1))
            .await
            .map(|(frame, _)| frame)
    }

    #[tokio::test]
    async fn whole_frame_is_returned_without_prefix() {
        let frame = read(&[0, 0, 0, 3, 7, 8, 9], 100).await;
        assert_eq!(frame.ok().as_deref(), Some(&[7u8, 8, 9][..]));
    }

    #[tokio::test]
    async fn size_zero_is_an_empty_frame() {
        let frame = read(&[0, 0, 0, 0], 100).await;
        assert_eq!(frame.ok().map(|f| f.len()), Some(0));
    }

    #[tokio::test]
    async fn sizes_are_checked_before_the_body() {
        assert!(matches!(
            read(&[0xff, 0xff, 0xff, 0xfe], 100).await,
            Err(FrameError::NegativeSize(-2))
        ));
        let too_large = read(&[0, 0, 0, 101], 100).await;
        assert!(matches!(
            too_large,
            Err(FrameError::TooLarge {
                size: 101,
                max: 100
            })
        ));
        assert_eq!(
            too_large.map(|_| ()).unwrap_err().to_string(),
            "Invalid receive (size = 101 larger than 100)"
        );
    }

    #[tokio::test]
    async fn clean_and_truncated_closes_differ() {
        assert!(matches!(read(&[], 100).await, Err(FrameError::Closed)));
        assert!(matches!(
            read(&[0, 0], 100).await,
            Err(FrameError::Truncated)
        ));
        assert!(matches!(
            read(&[0, 0, 0, 5, 1, 2], 100).await,
            Err(FrameError::Truncated)
        ));
    }

    #[tokio::test]
    async fn consecutive_frames_share_the_buffer() {
        let mut reader: &[u8] = &[0, 0, 0, 1, 42, 0, 0, 0, 2, 1, 2];
        let mut buffer = BytesMut::new();
        let pool = MemoryPool::new(-1);
        let first = read_frame(&mut reader, &mut buffer, 10, &pool).await;
        let second = read_frame(&mut reader, &mut buffer, 10, &pool).await;
        assert_eq!(first.ok().map(|f| f.0).as_deref(), Some(&[42u8][..]));
        assert_eq!(second.ok().map(|f| f.0).as_deref(), Some(&[1u8, 2][..]));
    }

    /// A reader that counts its reads.
    struct Counting<'a> {
        bytes: &'a [u8],
        reads: usize,
    }

    impl AsyncRead for Counting<'_> {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            self.reads += 1;
            std::pin::Pin::new(&mut self.bytes).poll_read(cx, buf)
        }
    }

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        frame
    }

    #[tokio::test]
    async fn pipelined_frames_small_and_large_are_read_whole_and_in_order() {
        let large: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let mut wire = framed(b"first");
        wire.extend(framed(&large));
        wire.extend(framed(b"third"));
        wire.extend(framed(b""));
        let mut reader = Counting {
            bytes: &wire,
            reads: 0,
        };
        let mut buffer = BytesMut::new();
        let pool = MemoryPool::new(-1);
        let mut frames = Vec::new();
        for _ in 0..4 {
            match read_frame(&mut reader, &mut buffer, 1 << 20, &pool).await {
                Ok((frame, _)) => frames.push(frame),
                Err(error) => panic!("{error}"),
            }
        }
        assert_eq!(frames[0], &b"first"[..]);
        assert_eq!(frames[1], &large[..]);
        assert_eq!(frames[2], &b"third"[..]);
        assert!(frames[3].is_empty());
        assert!(matches!(
            read_frame(&mut reader, &mut buffer, 1 << 20, &pool).await,
            Err(FrameError::Closed)
        ));
        // The large frame is read into one buffer of its size, 64 KiB at most per read.
        assert!(
            reader.reads <= 1 + 200_000 / READ_CHUNK + 3,
            "{} reads",
            reader.reads
        );
    }

    #[tokio::test]
    async fn a_small_frame_and_its_size_come_in_one_read() {
        let wire = framed(b"a small request");
        let mut reader = Counting {
            bytes: &wire,
            reads: 0,
        };
        let frame = read_frame(&mut reader, &mut BytesMut::new(), 100, &MemoryPool::new(-1)).await;
        assert_eq!(
            frame.ok().map(|f| f.0).as_deref(),
            Some(&b"a small request"[..])
        );
        assert_eq!(reader.reads, 1);
    }

    #[tokio::test]
    async fn the_body_waits_for_memory_and_holds_it_until_dropped() {
        let pool = MemoryPool::new(8);
        let held = pool.reserve(8).await;
        let mut reader: &[u8] = &[0, 0, 0, 3, 7, 8, 9];
        let mut buffer = BytesMut::new();
        let reading = read_frame(&mut reader, &mut buffer, 100, &pool);
        tokio::pin!(reading);
        let waiting =
            tokio::time::timeout(std::time::Duration::from_millis(1), reading.as_mut()).await;
        assert!(waiting.is_err(), "no memory left: the body is not read");
        drop(held);
        let (frame, reservation) = match reading.await {
            Ok(read) => read,
            Err(error) => panic!("{error}"),
        };
        assert_eq!(&frame[..], &[7u8, 8, 9][..]);
        assert_eq!(pool.available(), Some(5));
        drop(reservation);
        assert_eq!(pool.available(), Some(8));
    }
}
