//! Primitives of Kafka's wire encoding that `kafka-protocol` keeps private, for the answers
//! and records Gregor writes without the crate's structs.

use bytes::BufMut;

/// An unsigned varint (the compact lengths of the flexible versions, KIP-482).
pub fn put_uvarint<B: BufMut + ?Sized>(out: &mut B, mut value: u32) {
    while value >= 0x80 {
        out.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// How many bytes [`put_uvarint`] writes for `value`.
pub fn uvarint_len(value: u32) -> usize {
    (32 - value.leading_zeros() as usize).max(1).div_ceil(7)
}
