//! Retrying a URL download, as the official resolver does: up to four attempts, waiting 0.3 s,
//! 0.6 s and then 1 s between them (measured against the official package: the waits are
//! these to within a few milliseconds, without jitter).
//!
//! An attempt is repeated only when its error says another attempt may succeed
//! ([`ImageErrorKind::is_retryable`]: transport failures, statuses of 500 and above). A body
//! over the size limit ends the download at once; the resolver reports it as a retryable
//! `Fetch` failure nevertheless, because the official one does.

use std::time::Duration;

use crate::error::{ImageError, ImageErrorKind};

/// The waits between attempts; one attempt more than there are waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    pub waits: Vec<Duration>,
}

impl Default for RetryPolicy {
    /// The official schedule: 4 attempts, 300 ms, 600 ms and 1000 ms apart.
    fn default() -> Self {
        Self {
            waits: [300, 600, 1000].map(Duration::from_millis).to_vec(),
        }
    }
}

/// The most waits [`RetryPolicy::from_secs`] takes, and the longest wait, in seconds.
pub const MAX_RETRY_WAITS: usize = 16;
pub const MAX_RETRY_WAIT_S: f64 = 60.0;

impl RetryPolicy {
    /// One attempt, no retries.
    pub fn none() -> Self {
        Self { waits: Vec::new() }
    }

    /// A schedule given in seconds between attempts (a caller's setting): at most
    /// [`MAX_RETRY_WAITS`] waits of 0 to [`MAX_RETRY_WAIT_S`] seconds each; otherwise what is
    /// wrong with it.
    pub fn from_secs(waits: &[f64]) -> Result<Self, String> {
        if waits.len() > MAX_RETRY_WAITS {
            return Err(format!(
                "retry_waits holds {} waits; at most {MAX_RETRY_WAITS}",
                waits.len()
            ));
        }
        let waits = waits
            .iter()
            .map(|&w| {
                if (0.0..=MAX_RETRY_WAIT_S).contains(&w) {
                    Ok(Duration::from_secs_f64(w))
                } else {
                    Err(format!(
                        "retry_waits: {w} is not a wait of 0 to {MAX_RETRY_WAIT_S} seconds"
                    ))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { waits })
    }

    /// The most attempts one download gets.
    pub fn attempts(&self) -> usize {
        self.waits.len() + 1
    }

    /// Run `attempt` until it succeeds, fails for good, or the attempts run out; the last
    /// error is returned.
    pub fn run<T>(
        &self,
        mut attempt: impl FnMut() -> Result<T, ImageError>,
    ) -> Result<T, ImageError> {
        let mut waits = self.waits.iter();
        loop {
            match attempt() {
                Ok(v) => return Ok(v),
                Err(e) if e.kind.is_retryable() => match waits.next() {
                    Some(wait) => std::thread::sleep(*wait),
                    None => return Err(e),
                },
                Err(e) => return Err(e),
            }
        }
    }
}

/// How the resolver reports a download that failed: a body over the size limit becomes a
/// retryable `Fetch` failure naming the URL (as officially); everything else is unchanged.
pub fn as_resolver_failure(error: ImageError, url: &str) -> ImageError {
    if error.kind == ImageErrorKind::ImageTooLarge {
        return ImageError::download_failed(ImageErrorKind::Fetch, url, error.detail);
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_in_seconds_is_bounded() {
        let ok = RetryPolicy::from_secs(&[0.0, 0.25, 60.0]).unwrap();
        assert_eq!(
            ok.waits,
            [0, 250, 60_000].map(Duration::from_millis).to_vec()
        );
        assert_eq!(RetryPolicy::from_secs(&[]).unwrap(), RetryPolicy::none());
        assert!(RetryPolicy::from_secs(&[0.1; 17])
            .unwrap_err()
            .contains("at most 16"));
        for bad in [-1.0, 60.5, f64::NAN, f64::INFINITY] {
            assert!(RetryPolicy::from_secs(&[bad])
                .unwrap_err()
                .contains("not a wait"));
        }
    }

    fn fails(kind: ImageErrorKind) -> ImageError {
        ImageError::new(kind, "test")
    }

    fn attempts_until(kind: ImageErrorKind, succeed_at: usize) -> (usize, bool) {
        let policy = RetryPolicy {
            waits: vec![Duration::ZERO; 3],
        };
        let mut n = 0;
        let out = policy.run(|| {
            n += 1;
            if n == succeed_at {
                Ok(())
            } else {
                Err(fails(kind))
            }
        });
        (n, out.is_ok())
    }

    #[test]
    fn retryable_failures_get_four_attempts() {
        for kind in [
            ImageErrorKind::Fetch,
            ImageErrorKind::FetchStatus { retryable: true },
        ] {
            assert_eq!(attempts_until(kind, usize::MAX), (4, false));
            assert_eq!(attempts_until(kind, 4), (4, true));
            assert_eq!(attempts_until(kind, 2), (2, true));
        }
    }

    #[test]
    fn final_failures_get_one_attempt() {
        for kind in [
            ImageErrorKind::FetchStatus { retryable: false },
            ImageErrorKind::DestinationRejected,
            ImageErrorKind::ImageTooLarge,
            ImageErrorKind::InvalidUrl,
        ] {
            assert_eq!(attempts_until(kind, usize::MAX), (1, false));
        }
    }

    #[test]
    fn schedule_and_oversize_mapping() {
        let p = RetryPolicy::default();
        assert_eq!(p.attempts(), 4);
        assert_eq!(RetryPolicy::none().attempts(), 1);
        let e = as_resolver_failure(fails(ImageErrorKind::ImageTooLarge), "http://h/x");
        assert_eq!(e.kind, ImageErrorKind::Fetch);
        assert!(e.kind.is_retryable());
        assert_eq!(e.public, "Failed to download image from http://h/x");
    }
}
