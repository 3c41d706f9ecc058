//! Hand-built request frames for the hostile-request tests: lists far longer than any client
//! sends, written straight into the frame.

use bytes::{BufMut, BytesMut};

/// The `index`th distinct four-letter topic name (14.8 million of them).
pub fn distinct_name(index: usize) -> [u8; 4] {
    let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut name = [0u8; 4];
    let mut rest = index;
    for byte in name.iter_mut().rev() {
        *byte = alphabet[rest % alphabet.len()];
        rest /= alphabet.len();
    }
    name
}

/// A CreateTopics v7 frame (size prefix included; header v2 with correlation id 42 and
/// client id "m") naming the first `count` distinct four-letter topics, each with
/// `partitions` partitions of one replica, no assignments and no configs.
pub fn create_topics_v7(count: usize, partitions: i32, validate_only: bool) -> BytesMut {
    let mut frame = BytesMut::with_capacity(40 + count * 14);
    frame.put_i32(0);
    frame.put_i16(19);
    frame.put_i16(7);
    frame.put_i32(42);
    frame.put_i16(1);
    frame.put_u8(b'm');
    frame.put_u8(0);
    let mut compact = count as u32 + 1;
    while compact >= 0x80 {
        frame.put_u8((compact as u8 & 0x7f) | 0x80);
        compact >>= 7;
    }
    frame.put_u8(compact as u8);
    for index in 0..count {
        frame.put_u8(5);
        frame.put_slice(&distinct_name(index));
        frame.put_i32(partitions);
        // Replication factor 1, no assignments, no configs, no tagged fields.
        frame.put_slice(b"\x00\x01\x01\x01\x00");
    }
    // TimeoutMs, ValidateOnly, tagged fields.
    frame.put_i32(1_000);
    frame.put_u8(u8::from(validate_only));
    frame.put_u8(0);
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    frame
}
