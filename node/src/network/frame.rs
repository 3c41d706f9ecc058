//! Reading one size-prefixed Kafka frame from a socket.
//!
//! The 4-byte size is checked against `socket.request.max.bytes` before any of the body is
//! buffered, so an oversized or negative size costs four bytes of memory, not its claim.

use bytes::{Bytes, BytesMut};
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

/// Reads one frame body (without its size prefix). `buffer` is reused between frames. The body's
/// size is reserved in `memory` before any of it is read (waiting while the pool is used up);
/// the reservation comes back with the frame and is held until the request is done.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    buffer: &mut BytesMut,
    max_size: i32,
    memory: &std::sync::Arc<MemoryPool>,
) -> Result<(Bytes, Reservation), FrameError> {
    let mut prefix = [0u8; 4];
    let mut filled = 0;
    while filled < prefix.len() {
        match reader.read(&mut prefix[filled..]).await {
            Ok(0) if filled == 0 => return Err(FrameError::Closed),
            Ok(0) => return Err(FrameError::Truncated),
            Ok(read) => filled += read,
            Err(error) => return Err(FrameError::Io(error)),
        }
    }
    let size = i32::from_be_bytes(prefix);
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
    buffer.clear();
    if size > READ_CHUNK {
        // One allocation of exactly the frame: growing by doubling would copy the body and
        // hold up to three times its size. Pages of it become resident only as data arrives.
        *buffer = BytesMut::with_capacity(size);
    }
    while buffer.len() < size {
        buffer.reserve((size - buffer.len()).min(READ_CHUNK));
        let wanted = size - buffer.len();
        let read = (&mut *reader)
            .take(wanted as u64)
            .read_buf(buffer)
            .await
            .map_err(FrameError::Io)?;
        if read == 0 {
            return Err(FrameError::Truncated);
        }
    }
    Ok((buffer.split().freeze(), reservation))
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
