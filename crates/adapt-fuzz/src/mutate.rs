//! Mutations of a valid input, the kinds that find parser bugs: flipped
//! bits, bytes set to boundary values, 32- and 64-bit fields set to absurd
//! lengths, insertions, deletions, truncations and repeated chunks.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::RngCore;

const INTERESTING_U32: [u32; 8] = [
    0,
    1,
    0x7F,
    0xFF,
    0xFFFF,
    0x7FFF_FFFF,
    0x8000_0000,
    0xFFFF_FFFF,
];

fn below(rng: &mut ChaCha8Rng, n: usize) -> usize {
    ((u128::from(rng.next_u64()) * n as u128) >> 64) as usize
}

/// One to four mutations of `input`.
pub fn mutate(rng: &mut ChaCha8Rng, input: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + below(rng, 4) {
        let len = v.len();
        match below(rng, 9) {
            0 if len > 0 => {
                let i = below(rng, len);
                v[i] ^= 1 << below(rng, 8);
            }
            1 if len > 0 => {
                let i = below(rng, len);
                // Boundaries, and bincode's varint tags for 2-, 4-, 8- and
                // 16-byte lengths (the next bytes then make them absurd).
                v[i] = [0, 1, 0x7F, 0x80, 0xFF, 0xFB, 0xFC, 0xFD, 0xFE][below(rng, 9)];
            }
            2 if len >= 4 => {
                let i = below(rng, len - 3);
                let x = INTERESTING_U32[below(rng, INTERESTING_U32.len())];
                let bytes = if rng.next_u32() & 1 == 0 {
                    x.to_le_bytes()
                } else {
                    x.to_be_bytes()
                };
                v[i..i + 4].copy_from_slice(&bytes);
            }
            3 if len >= 8 => {
                let i = below(rng, len - 7);
                let x = [u64::MAX, 1 << 40, (1 << 32) + 1, i64::MAX as u64][below(rng, 4)];
                v[i..i + 8].copy_from_slice(&x.to_le_bytes());
            }
            4 => {
                let i = below(rng, len + 1);
                let n = 1 + below(rng, 16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next_u32() as u8).collect();
                v.splice(i..i, bytes);
            }
            5 if len > 0 => {
                let i = below(rng, len);
                let n = (1 + below(rng, 64)).min(len - i);
                v.drain(i..i + n);
            }
            6 if len > 0 => v.truncate(below(rng, len)),
            7 if len > 0 => {
                let i = below(rng, len);
                let n = (1 + below(rng, 256)).min(len - i);
                let chunk = v[i..i + n].to_vec();
                let at = below(rng, len + 1);
                v.splice(at..at, chunk);
            }
            _ if len > 0 => {
                // A decimal number in a text format, made absurd.
                if let Some(i) = v.iter().position(u8::is_ascii_digit) {
                    let absurd = [
                        "99999999999999999999",
                        "-1",
                        "18446744073709551615",
                        "0",
                        "NaN",
                    ];
                    let s = absurd[below(rng, absurd.len())].as_bytes().to_vec();
                    v.splice(i..i + 1, s);
                }
            }
            _ => v.push(rng.next_u32() as u8),
        }
    }
    v
}
