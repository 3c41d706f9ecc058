//! Zig-zag varints of Kafka records (protobuf `sint32`/`sint64`).
//!
//! Hand-written: the flexible protocol's unsigned varints in kafka-protocol are a different codec, and
//! these few lines decode straight from a borrowed slice without a cursor type.

/// Decodes a zig-zag varint of at most 5 bytes; returns the value and the bytes used.
pub(crate) fn read_varint(buf: &[u8]) -> Option<(i32, usize)> {
    let (raw, used) = read_unsigned(buf, 5)?;
    let raw = u32::try_from(raw).ok()?;
    Some((((raw >> 1) as i32) ^ -((raw & 1) as i32), used))
}

/// Decodes a zig-zag varlong of at most 10 bytes; returns the value and the bytes used.
pub(crate) fn read_varlong(buf: &[u8]) -> Option<(i64, usize)> {
    let (raw, used) = read_unsigned(buf, 10)?;
    Some((((raw >> 1) as i64) ^ -((raw & 1) as i64), used))
}

fn read_unsigned(buf: &[u8], max_bytes: usize) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (i, byte) in buf.iter().take(max_bytes).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

pub(crate) fn write_varint(out: &mut Vec<u8>, value: i32) {
    write_unsigned(out, u64::from(((value << 1) ^ (value >> 31)) as u32));
}

pub(crate) fn write_varlong(out: &mut Vec<u8>, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn write_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

pub(crate) fn varint_size(value: i32) -> usize {
    let mut v = u64::from(((value << 1) ^ (value >> 31)) as u32);
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_matches_protobuf_examples() {
        for (value, bytes) in [
            (0i32, vec![0u8]),
            (-1, vec![1]),
            (1, vec![2]),
            (-2, vec![3]),
            (63, vec![0x7e]),
            (64, vec![0x80, 0x01]),
        ] {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            assert_eq!(out, bytes, "{value}");
            assert_eq!(read_varint(&bytes), Some((value, bytes.len())));
            assert_eq!(varint_size(value), bytes.len());
        }
        let mut out = Vec::new();
        write_varlong(&mut out, i64::MIN);
        assert_eq!(out.len(), 10);
        assert_eq!(read_varlong(&out), Some((i64::MIN, 10)));
        assert_eq!(
            read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]),
            None,
            "6 bytes is too long"
        );
        assert_eq!(read_varint(&[0x80]), None, "truncated");
    }
}
