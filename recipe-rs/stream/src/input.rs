//! What the backend hands to the stream processor, and the log-probability records that travel
//! with decoded text.

use serde::Serialize;

/// Prompt-side token counts reported by the backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PromptUsage {
    pub prompt_tokens: u64,
    pub prompt_cache_hit_tokens: u64,
}

/// Why the backend stopped producing tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InferenceFinishReason {
    Stop,
    Length,
    ContentFilter,
}

/// One backend update.
#[derive(Clone, Debug, PartialEq)]
pub enum InferenceChunk {
    /// The prompt was processed; carries prompt usage and the backend fingerprint.
    Ready {
        prompt_usage: Option<PromptUsage>,
        system_fingerprint: Option<String>,
    },
    /// Already-decoded text that accounts for `token_count` tokens.
    Text { content: String, token_count: u64 },
    /// Raw token IDs, optionally with one `(logprob, top_logprobs)` pair per ID.
    Tokens {
        token_ids: Vec<u32>,
        logprobs: Option<Vec<IdLogprob>>,
    },
    /// The backend is done.
    Finish(InferenceFinishReason),
}

/// One alternative in a top-logprobs list, as all three protocols write it (field order is the
/// wire order).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TopLogprob {
    pub token: String,
    #[serde(serialize_with = "shortest_f32")]
    pub logprob: f32,
    pub bytes: Vec<u8>,
}

/// A backend's log probability for one generated token ID, with its top alternatives as
/// `(token_id, logprob)` pairs.
pub type IdLogprob = (f32, Vec<(u32, f32)>);

/// The log probability of one emitted token, as the protocols report it (field order is the
/// wire order).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TokenLogprob {
    pub token: String,
    #[serde(serialize_with = "shortest_f32")]
    pub logprob: f32,
    pub bytes: Vec<u8>,
    pub top_logprobs: Vec<TopLogprob>,
}

/// The display string of a token's bytes: the text when it is valid UTF-8, otherwise every
/// byte written as `\xNN`.
pub fn token_display(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => bytes.iter().map(|b| format!("\\x{b:02x}")).collect(),
    }
}

/// Writes a log probability with [`f32_json`].
fn shortest_f32<S: serde::Serializer>(x: &f32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(f32_json(*x))
}

/// An `f32` as the `f64` with the same shortest decimal form, so JSON shows `-0.37`, not
/// `-0.3700000047683716`.
pub fn f32_json(x: f32) -> f64 {
    if !x.is_finite() {
        return x as f64;
    }
    format!("{x}").parse::<f64>().unwrap_or(x as f64)
}
