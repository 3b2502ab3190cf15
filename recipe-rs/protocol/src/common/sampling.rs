//! Sampling settings: range checks of the request values and the values the backend gets.

use recipe_core::ModelVersion;

use crate::error::{reject, ConvResult};

/// Temperature must lie in [0, 2].
pub fn check_temperature(t: Option<f32>) -> ConvResult<()> {
    match t {
        Some(t) if !(0.0..=2.0).contains(&t) => {
            reject("Invalid temperature value, the valid range of temperature is [0, 2]")
        }
        _ => Ok(()),
    }
}

/// top_p must lie in (0, 1].
pub fn check_top_p(p: Option<f32>) -> ConvResult<()> {
    match p {
        Some(p) if !(p > 0.0 && p <= 1.0) => {
            reject("Invalid top_p value, the valid range of top_p is (0, 1.0]")
        }
        _ => Ok(()),
    }
}

/// max_tokens must lie in [1, bound].
pub fn check_max_tokens(m: Option<u32>, bound: u32) -> ConvResult<()> {
    match m {
        Some(m) if m < 1 || m > bound => reject(format!(
            "Invalid max_tokens value, the valid range of max_tokens is [1, {bound}]"
        )),
        _ => Ok(()),
    }
}

/// Thinking mode always samples at temperature 1.
pub fn resolve_temperature(thinking: bool, requested: Option<f32>) -> f32 {
    if thinking {
        1.0
    } else {
        requested.unwrap_or(1.0)
    }
}

/// The top_p the backend gets (the model version's rule).
pub fn resolve_top_p(
    version: ModelVersion,
    thinking: bool,
    tools_active: bool,
    requested: Option<f32>,
) -> f32 {
    version
        .profile()
        .conversion
        .top_p
        .resolve(thinking, tools_active, requested)
}

/// A list of stop strings: at most 16, none empty.
pub fn check_stop_list(list: &[String]) -> ConvResult<()> {
    if list.len() > 16 {
        return reject(format!("Stop string array too long: {}", list.len()));
    }
    if let Some(i) = list.iter().position(String::is_empty) {
        return reject(format!(
            "Invalid 'stop[{i}]': empty string. Expected a string with minimum length 1, but got an empty string instead."
        ));
    }
    Ok(())
}
