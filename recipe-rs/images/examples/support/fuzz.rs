//! Mutation fuzzing of the decode path, shared by the seeded test and the long-run example.
//!
//! Seeds are the recorded PNG/JPEG/GIF/WebP inputs; each case flips, overwrites, inserts,
//! deletes or truncates bytes (a few edits per case) and runs sniff → header → decode. A case
//! passes when it returns (an image or an error); a panic or a crash fails the run.

use std::path::Path;

use recipe_images::decode::{decode_rgb, header_dimensions};
use recipe_images::sniff::sniff;

/// xorshift64*: deterministic, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The small seed files of the four decoded formats.
pub fn seeds(inputs: &Path) -> Vec<Vec<u8>> {
    let names = [
        "rgb.png",
        "gray16.png",
        "rgba.png",
        "palette_trns.png",
        "anim.png",
        "photo.jpg",
        "progressive.jpg",
        "gray.jpg",
        "still.gif",
        "anim.gif",
        "lossy.webp",
        "lossless.webp",
        "alpha.webp",
        "anim.webp",
    ];
    names
        .iter()
        .map(|n| std::fs::read(inputs.join(n)).expect("seed input"))
        .collect()
}

/// One mutated file.
pub fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut data = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        if data.is_empty() {
            break;
        }
        let at = rng.below(data.len());
        match rng.below(6) {
            0 => data[at] ^= 1 << rng.below(8),
            1 => data[at] = rng.next() as u8,
            2 => {
                let end = (at + 1 + rng.below(16)).min(data.len());
                for b in &mut data[at..end] {
                    *b = rng.next() as u8;
                }
            }
            3 => data.insert(at, rng.next() as u8),
            4 => {
                data.remove(at);
            }
            _ => data.truncate(at.max(8)),
        }
        // Bias edits towards headers, where sizes and chunk lengths live.
        if rng.below(3) == 0 && data.len() > 40 {
            let at = rng.below(40);
            data[at] = data[at].wrapping_add(rng.next() as u8 | 1);
        }
    }
    data
}

/// Decode one input the way preprocessing does; return whether it produced pixels.
pub fn run_one(data: &[u8]) -> bool {
    let Ok(media) = sniff(data) else { return false };
    let Ok((w, h)) = header_dimensions(data, media) else {
        return false;
    };
    if w > 8192 || h > 8192 {
        return false;
    }
    decode_rgb(data, media, 4096 * 4096).is_ok()
}

/// Run `cases` mutations; return (cases, decoded) counts.
pub fn run(inputs: &Path, cases: usize, seed: u64) -> (usize, usize) {
    let seeds = seeds(inputs);
    let mut rng = Rng::new(seed);
    let mut decoded = 0;
    for _ in 0..cases {
        let s = &seeds[rng.below(seeds.len())];
        let input = mutate(s, &mut rng);
        decoded += run_one(&input) as usize;
    }
    (cases, decoded)
}
