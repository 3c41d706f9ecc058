//! Gregor: UTF-8 decoded exactly as Kafka's `Readable.readString` decodes it,
//! `new String(bytes, UTF_8)` on a JDK 17+ (`String.decodeUTF8_UTF16`).
//!
//! Written by hand because the replacement of invalid bytes differs from Rust's
//! `String::from_utf8_lossy` (the Unicode "maximal subpart" practice): the JDK decodes an
//! encoded surrogate (`ED A0 80`) as one U+FFFD where Rust gives three, and stops at a truncated
//! sequence at the end (`ED A0` is one U+FFFD, not two). Names that differ there would be
//! different topics, groups or ACLs in Gregor and the same one in Kafka. Valid UTF-8 decodes the
//! same either way, so callers take this path only for invalid input.

const REPLACEMENT: char = '\u{FFFD}';

fn is_not_continuation(b: u8) -> bool {
    b & 0xC0 != 0x80
}

fn is_malformed3(b1: u8, b2: u8, b3: u8) -> bool {
    (b1 == 0xE0 && b2 & 0xE0 == 0x80) || is_not_continuation(b2) || is_not_continuation(b3)
}

/// How many bytes of a malformed three-byte sequence at `at` the JDK skips.
fn malformed3(src: &[u8], at: usize) -> usize {
    let (b1, b2) = (src[at], src[at + 1]);
    if (b1 == 0xE0 && b2 & 0xE0 == 0x80) || is_not_continuation(b2) {
        1
    } else {
        2
    }
}

fn is_malformed3_2(b1: u8, b2: u8) -> bool {
    (b1 == 0xE0 && b2 & 0xE0 == 0x80) || is_not_continuation(b2)
}

fn is_malformed4_2(b1: u8, b2: u8) -> bool {
    (b1 == 0xF0 && !(0x90..=0xBF).contains(&b2))
        || (b1 == 0xF4 && b2 & 0xF0 != 0x80)
        || is_not_continuation(b2)
}

/// How many bytes of a malformed four-byte sequence at `at` the JDK skips.
fn malformed4(src: &[u8], at: usize) -> usize {
    let (b1, b2) = (src[at], src[at + 1]);
    if b1 > 0xF4 || is_malformed4_2(b1, b2) {
        1
    } else if is_not_continuation(src[at + 2]) {
        2
    } else {
        3
    }
}

/// `bytes` decoded as the JDK decodes UTF-8, invalid sequences replaced by U+FFFD.
pub fn java_utf8_lossy(src: &[u8]) -> String {
    let mut out = String::with_capacity(src.len());
    let end = src.len();
    let mut at = 0;
    while at < end {
        let b1 = src[at];
        at += 1;
        match b1 {
            0x00..=0x7F => out.push(char::from(b1)),
            0xC2..=0xDF => {
                if at < end {
                    let b2 = src[at];
                    if is_not_continuation(b2) {
                        out.push(REPLACEMENT);
                    } else {
                        at += 1;
                        let c = (u32::from(b1 & 0x1F) << 6) | u32::from(b2 & 0x3F);
                        out.push(char::from_u32(c).unwrap_or(REPLACEMENT));
                    }
                    continue;
                }
                out.push(REPLACEMENT);
                break;
            }
            0xE0..=0xEF => {
                if at + 1 < end {
                    let (b2, b3) = (src[at], src[at + 1]);
                    if is_malformed3(b1, b2, b3) {
                        out.push(REPLACEMENT);
                        at = at - 1 + malformed3(src, at - 1);
                    } else {
                        at += 2;
                        let c = (u32::from(b1 & 0x0F) << 12)
                            | (u32::from(b2 & 0x3F) << 6)
                            | u32::from(b3 & 0x3F);
                        // A surrogate is not a character: `char::from_u32` refuses it too.
                        out.push(char::from_u32(c).unwrap_or(REPLACEMENT));
                    }
                    continue;
                }
                if at < end && is_malformed3_2(b1, src[at]) {
                    out.push(REPLACEMENT);
                    continue;
                }
                out.push(REPLACEMENT);
                break;
            }
            0xF0..=0xF7 => {
                if at + 2 < end {
                    let (b2, b3, b4) = (src[at], src[at + 1], src[at + 2]);
                    let c = (u32::from(b1 & 0x07) << 18)
                        | (u32::from(b2 & 0x3F) << 12)
                        | (u32::from(b3 & 0x3F) << 6)
                        | u32::from(b4 & 0x3F);
                    let malformed = is_not_continuation(b2)
                        || is_not_continuation(b3)
                        || is_not_continuation(b4);
                    if malformed || !(0x1_0000..=0x10_FFFF).contains(&c) {
                        out.push(REPLACEMENT);
                        at = at - 1 + malformed4(src, at - 1);
                    } else {
                        at += 3;
                        out.push(char::from_u32(c).unwrap_or(REPLACEMENT));
                    }
                    continue;
                }
                if b1 > 0xF4 || (at < end && is_malformed4_2(b1, src[at])) {
                    out.push(REPLACEMENT);
                    continue;
                }
                at += 1;
                out.push(REPLACEMENT);
                if at < end && is_not_continuation(src[at]) {
                    continue;
                }
                break;
            }
            _ => out.push(REPLACEMENT),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::java_utf8_lossy;

    fn replaced(bytes: &[u8]) -> String {
        java_utf8_lossy(bytes).replace('\u{FFFD}', "?")
    }

    #[test]
    fn valid_utf8_decodes_as_rust_decodes_it() {
        let text = "a\u{e9}\u{20ac}\u{1f600}z";
        assert_eq!(java_utf8_lossy(text.as_bytes()), text);
    }

    #[test]
    fn invalid_bytes_are_replaced_as_the_jdk_replaces_them() {
        // An encoded surrogate is one replacement, a CESU-8 pair two.
        assert_eq!(replaced(b"d\xed\xa0\x80z"), "d?z");
        assert_eq!(replaced(b"\xed\xa0\x80\xed\xb0\x80"), "??");
        // A truncated sequence at the end is one replacement, and ends the string.
        assert_eq!(replaced(b"a\xed\xa0"), "a?");
        assert_eq!(replaced(b"a\xe2\x82"), "a?");
        assert_eq!(replaced(b"a\xf0\x9f\x98"), "a?");
        assert_eq!(replaced(b"a\xc3"), "a?");
        // A sequence cut by a byte that continues nothing: the lead and its continuations
        // are one replacement, then the byte.
        assert_eq!(replaced(b"\xed\xa0A"), "?A");
        assert_eq!(replaced(b"\xe2\x82A"), "?A");
        assert_eq!(replaced(b"\xc3A"), "?A");
        // Overlong forms, stray continuations and bytes that start nothing: one each.
        assert_eq!(replaced(b"\xe0\x80\x80"), "???");
        assert_eq!(replaced(b"\xc0\x80"), "??");
        assert_eq!(replaced(b"\xff\xfe"), "??");
        assert_eq!(replaced(b"\x80"), "?");
        // Above U+10FFFF.
        assert_eq!(replaced(b"\xf4\x90\x80\x80"), "????");
        assert_eq!(replaced(b"\xf5\x80\x80\x80"), "????");
    }
}
