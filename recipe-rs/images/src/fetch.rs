//! Fetching external image URLs over HTTP(S) (reqwest, rustls).
//!
//! * Redirects (301, 302, 303, 307, 308) are followed by hand, at most [`MAX_REDIRECTS`], so
//!   that every hop is checked; any other status, 3xx included, ends the download.
//! * The size limit applies to `Content-Length` and again to the streamed body.
//! * A destination filter, when set, is asked `(host, address)` for every address a hop may
//!   connect to (each resolved address of a host name, or the literal address); the request is
//!   pinned to the allowed addresses and made without a proxy, so the filter is never asked
//!   about a proxy. Without a filter the fetcher connects anywhere and honours the proxy
//!   environment as it was when the fetcher was made (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`,
//!   their lower-case forms and `NO_PROXY`, read by reqwest), like the official one.
//! * [`deny_private_destinations`] is a ready filter for untrusted URLs.
//! * Statuses: 2xx is success, 500 and above (up to 999) a retryable failure, anything else a
//!   final one. The fetcher itself makes one attempt; the resolver retries (see `resolve`).

use std::io::Read;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{ImageError, ImageErrorKind};

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 5;
/// The statuses that redirect (others of 300–399, such as 300, 304 or 305, are final answers,
/// refused like any other non-2xx status).
pub const FOLLOWED_REDIRECTS: [u16; 5] = [301, 302, 303, 307, 308];
/// Default encoded size limit of one fetched image (32 MiB, as officially).
pub const DEFAULT_MAX_BYTES: u64 = 32 * 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(30);

/// `(host, address) → allowed`.
pub type DestinationFilter = Arc<dyn Fn(&str, &IpAddr) -> bool + Send + Sync>;

#[derive(Clone)]
pub struct ImageFetcher {
    pub max_bytes: u64,
    pub filter: Option<DestinationFilter>,
    /// The unfiltered client, built when the fetcher is made so that it keeps the proxy
    /// environment of that moment (`Err`: why it could not be built, reported on fetch).
    direct: Result<reqwest::blocking::Client, String>,
}

impl Default for ImageFetcher {
    fn default() -> Self {
        Self::with_max_bytes(DEFAULT_MAX_BYTES)
    }
}

fn client_builder() -> reqwest::blocking::ClientBuilder {
    reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(TIMEOUT)
}

impl std::fmt::Debug for ImageFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageFetcher")
            .field("max_bytes", &self.max_bytes)
            .field("filtered", &self.filter.is_some())
            .finish()
    }
}

/// Whether an address is public: not loopback, private, link-local, CGNAT (which includes
/// cloud metadata services on some providers), unspecified, multicast, broadcast,
/// documentation or benchmarking ranges, unique-local IPv6, or an IPv4 address of those kinds
/// mapped or translated into IPv6.
pub fn is_public_address(addr: &IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (o[1] == 18 || o[1] == 19))
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_address(&IpAddr::V4(v4));
            }
            let s = v6.segments();
            if s[0] == 0x64 && s[1] == 0xff9b {
                let v4 = std::net::Ipv4Addr::new(
                    (s[6] >> 8) as u8,
                    s[6] as u8,
                    (s[7] >> 8) as u8,
                    s[7] as u8,
                );
                return is_public_address(&IpAddr::V4(v4));
            }
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] == 0x2001 && s[1] == 0x0db8)
                || s[..6] == [0, 0, 0, 0, 0, 0])
        }
    }
}

/// The ready SSRF filter: allow public addresses only.
pub fn deny_private_destinations() -> DestinationFilter {
    Arc::new(|_host: &str, addr: &IpAddr| is_public_address(addr))
}

impl ImageFetcher {
    /// An unfiltered fetcher with this size limit; the proxy environment is read now.
    pub fn with_max_bytes(max_bytes: u64) -> Self {
        Self {
            max_bytes,
            filter: None,
            direct: client_builder().build().map_err(|e| e.to_string()),
        }
    }

    /// A copy that connects only to addresses `filter` allows, without a proxy.
    pub fn with_filter(&self, filter: DestinationFilter) -> Self {
        Self {
            filter: Some(filter),
            ..self.clone()
        }
    }

    fn too_large(&self) -> ImageError {
        ImageError::with_public(
            ImageErrorKind::ImageTooLarge,
            crate::limits::image_too_large(self.max_bytes),
            "body over the size limit",
        )
    }

    /// Download one image (at most `max_bytes`).
    pub fn fetch(&self, url: &str) -> Result<Vec<u8>, ImageError> {
        self.fetch_within(url, self.max_bytes)
    }

    /// Download one image, cut off as `ImageTooLarge` once it exceeds `limit` bytes (or
    /// `max_bytes`, whichever is smaller) while it streams in.
    pub fn fetch_within(&self, url: &str, limit: u64) -> Result<Vec<u8>, ImageError> {
        let limit = limit.min(self.max_bytes);
        let fail =
            |kind: ImageErrorKind, detail: String| ImageError::download_failed(kind, url, detail);
        let mut current =
            reqwest::Url::parse(url).map_err(|e| fail(ImageErrorKind::Fetch, e.to_string()))?;
        for _hop in 0..=MAX_REDIRECTS {
            if !matches!(current.scheme(), "http" | "https") {
                return Err(fail(
                    ImageErrorKind::Fetch,
                    format!("scheme {}", current.scheme()),
                ));
            }
            let client = self.client_for(&current).map_err(|mut e| {
                e.public = format!("Failed to download image from {url}");
                e
            })?;
            let response = client
                .get(current.clone())
                .send()
                .map_err(|e| fail(ImageErrorKind::Fetch, e.to_string()))?;
            let status = response.status();
            if FOLLOWED_REDIRECTS.contains(&status.as_u16()) {
                // Without a Location, or with one that is not a URL, the answer is final.
                let final_status =
                    |detail: String| fail(ImageErrorKind::FetchStatus { retryable: false }, detail);
                let Some(location) = response.headers().get(reqwest::header::LOCATION) else {
                    return Err(final_status(format!("status {status}")));
                };
                let location = location.to_str().map_err(|e| final_status(e.to_string()))?;
                current = current
                    .join(location)
                    .map_err(|e| final_status(e.to_string()))?;
                continue;
            }
            if !status.is_success() {
                let kind = ImageErrorKind::FetchStatus {
                    retryable: status.as_u16() >= 500,
                };
                return Err(fail(kind, format!("status {status}")));
            }
            return self.read_body(response, url, limit);
        }
        Err(fail(ImageErrorKind::Fetch, "too many redirects".into()))
    }

    fn read_body(
        &self,
        response: reqwest::blocking::Response,
        url: &str,
        limit: u64,
    ) -> Result<Vec<u8>, ImageError> {
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(self.too_large());
        }
        let mut body = Vec::new();
        let mut limited = response.take(limit.saturating_add(1));
        limited
            .read_to_end(&mut body)
            .map_err(|e| ImageError::download_failed(ImageErrorKind::Fetch, url, e.to_string()))?;
        if body.len() as u64 > limit {
            return Err(self.too_large());
        }
        Ok(body)
    }

    /// A client for one hop: the unfiltered one, or one pinned to the filter's allowed
    /// addresses.
    fn client_for(&self, url: &reqwest::Url) -> Result<reqwest::blocking::Client, ImageError> {
        let Some(filter) = &self.filter else {
            return self
                .direct
                .clone()
                .map_err(|e| ImageError::new(ImageErrorKind::Fetch, e));
        };
        let builder = client_builder();
        let rejected =
            |detail: String| ImageError::new(ImageErrorKind::DestinationRejected, detail);
        let host = url
            .host_str()
            .ok_or_else(|| rejected("no host".into()))?
            .to_string();
        let port = url.port_or_known_default().unwrap_or(80);
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let candidates: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => (bare, port)
                .to_socket_addrs()
                .map_err(|e| {
                    ImageError::new(ImageErrorKind::Fetch, format!("resolve {bare}: {e}"))
                })?
                .collect(),
        };
        let allowed: Vec<SocketAddr> = candidates
            .into_iter()
            .filter(|a| filter(bare, &a.ip()))
            .collect();
        if allowed.is_empty() {
            return Err(rejected(format!("no allowed address for {bare}")));
        }
        let builder = builder.no_proxy();
        let builder = if bare.parse::<IpAddr>().is_ok() {
            builder
        } else {
            builder.resolve_to_addrs(bare, &allowed)
        };
        builder
            .build()
            .map_err(|e| ImageError::new(ImageErrorKind::Fetch, e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_filter_classes() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "fd00::1",
            "fe80::1",
            "64:ff9b::a9fe:a9fe",
            "::",
        ] {
            assert!(!is_public_address(&a.parse().unwrap()), "{a}");
        }
        for a in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public_address(&a.parse().unwrap()), "{a}");
        }
    }
}
