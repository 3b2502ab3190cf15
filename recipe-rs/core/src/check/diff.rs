//! Shortest edit script between two token-ID sequences (Myers' O(ND) greedy algorithm), as a
//! list of hunks. The common prefix and suffix are cut off first; when the middle needs more
//! than [`MAX_EDITS`] edits the whole middle is reported as one hunk (an input that different
//! gains nothing from a finer split, and the work stays bounded).

use std::ops::Range;

/// Edit budget of the search (work and memory grow with its square).
pub const MAX_EDITS: usize = 3000;

/// A differing stretch: `expected[a]` was replaced by `found[b]` (either may be empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hunk {
    pub a: Range<usize>,
    pub b: Range<usize>,
}

/// Hunks turning `a` into `b`, in order. Hunks separated by fewer than `join` equal tokens are
/// merged into one (a changed word often leaves one or two equal tokens in its middle).
pub fn hunks(a: &[u32], b: &[u32], join: usize) -> Vec<Hunk> {
    let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suf = a[pre..]
        .iter()
        .rev()
        .zip(b[pre..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[pre..a.len() - suf], &b[pre..b.len() - suf]);
    if ma.is_empty() && mb.is_empty() {
        return Vec::new();
    }
    let raw = match myers(ma, mb) {
        Some(h) => h,
        None => vec![Hunk {
            a: 0..ma.len(),
            b: 0..mb.len(),
        }],
    };
    let mut out: Vec<Hunk> = Vec::with_capacity(raw.len());
    for h in raw {
        let h = Hunk {
            a: h.a.start + pre..h.a.end + pre,
            b: h.b.start + pre..h.b.end + pre,
        };
        match out.last_mut() {
            Some(last) if h.a.start - last.a.end < join && h.b.start - last.b.end < join => {
                last.a.end = h.a.end;
                last.b.end = h.b.end;
            }
            _ => out.push(h),
        }
    }
    out
}

/// Myers' forward greedy search with the trace kept, then a backtrack into hunks.
fn myers(a: &[u32], b: &[u32]) -> Option<Vec<Hunk>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = (a.len() + b.len()).min(MAX_EDITS) as isize;
    let off = max + 1;
    let mut v = vec![0isize; (2 * max + 3) as usize];
    let mut trace: Vec<Vec<isize>> = Vec::new();
    let mut found = false;
    'outer: for d in 0..=max {
        trace.push(v[(off - d) as usize..=(off + d) as usize].to_vec());
        let mut k = -d;
        while k <= d {
            let mut x =
                if k == -d || (k != d && v[(off + k - 1) as usize] < v[(off + k + 1) as usize]) {
                    v[(off + k + 1) as usize]
                } else {
                    v[(off + k - 1) as usize] + 1
                };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[(off + k) as usize] = x;
            if x >= n && y >= m {
                found = true;
                break 'outer;
            }
            k += 2;
        }
    }
    if !found {
        return None;
    }
    // Backtrack: `trace[d]` is the state before step d, covering diagonals -d..=d.
    let mut edits: Vec<(usize, usize, bool)> = Vec::new(); // (x, y, is_delete)
    let (mut x, mut y) = (n, m);
    for d in (1..trace.len() as isize).rev() {
        let vd = &trace[d as usize];
        let at = |k: isize| vd[(k + d) as usize];
        let k = x - y;
        let prev_k = if k == -d || (k != d && at(k - 1) < at(k + 1)) {
            k + 1
        } else {
            k - 1
        };
        let prev_x = at(prev_k);
        let prev_y = prev_x - prev_k;
        // Undo the diagonal run that followed the edit.
        let (edit_x, edit_y) = if prev_k == k + 1 {
            (prev_x, prev_y + 1)
        } else {
            (prev_x + 1, prev_y)
        };
        while x > edit_x && y > edit_y {
            x -= 1;
            y -= 1;
        }
        edits.push((prev_x as usize, prev_y as usize, prev_k != k + 1));
        x = prev_x;
        y = prev_y;
    }
    edits.reverse();
    let mut out: Vec<Hunk> = Vec::new();
    for (x, y, del) in edits {
        let (a_r, b_r) = if del {
            (x..x + 1, y..y)
        } else {
            (x..x, y..y + 1)
        };
        match out.last_mut() {
            Some(h) if h.a.end == a_r.start && h.b.end == b_r.start => {
                h.a.end = a_r.end;
                h.b.end = b_r.end;
            }
            _ => out.push(Hunk { a: a_r, b: b_r }),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(a: &[u32], b: &[u32], hs: &[Hunk]) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i = 0;
        for h in hs {
            out.extend_from_slice(&a[i..h.a.start]);
            out.extend_from_slice(&b[h.b.clone()]);
            i = h.a.end;
        }
        out.extend_from_slice(&a[i..]);
        out
    }

    #[test]
    fn hunks_rebuild_the_target() {
        let cases: [(&[u32], &[u32]); 6] = [
            (&[1, 2, 3], &[1, 2, 3]),
            (&[1, 2, 3], &[1, 9, 3]),
            (&[1, 2, 3, 4, 5], &[1, 3, 4, 6, 5, 7]),
            (&[], &[4, 5]),
            (&[4, 5], &[]),
            (&[1, 2, 3, 4, 5, 6, 7, 8], &[8, 1, 2, 4, 3, 5, 6, 9, 7]),
        ];
        for (a, b) in cases {
            for join in [0, 1, 3] {
                let hs = hunks(a, b, join);
                assert_eq!(apply(a, b, &hs), b, "{a:?} -> {b:?}");
                // Equal tokens in between hunks line up on both sides.
                let mut prev = (0, 0);
                for h in &hs {
                    assert_eq!(h.a.start - prev.0, h.b.start - prev.1);
                    prev = (h.a.end, h.b.end);
                }
            }
        }
        assert!(hunks(&[1, 2], &[1, 2], 0).is_empty());
        assert_eq!(
            hunks(&[1, 2, 3], &[1, 9, 3], 0),
            vec![Hunk { a: 1..2, b: 1..2 }]
        );
    }

    #[test]
    fn random_pairs_rebuild() {
        let mut seed = 7u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..300 {
            let la = (next() % 30) as usize;
            let a: Vec<u32> = (0..la).map(|_| (next() % 5) as u32).collect();
            let mut b = a.clone();
            for _ in 0..(next() % 6) {
                let p = (next() as usize) % (b.len() + 1);
                if next() % 2 == 0 && p < b.len() {
                    b.remove(p);
                } else {
                    b.insert(p, (next() % 7) as u32);
                }
            }
            let hs = hunks(&a, &b, 0);
            assert_eq!(apply(&a, &b, &hs), b);
        }
    }
}
