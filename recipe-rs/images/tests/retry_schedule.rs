//! Our retry schedule against the waits measured on the official resolver
//! (`tests/conformance/images/network_cases.json`, field `waits` of the `resolve_url` cases):
//! the same number of attempts, and each wait within 60 ms of the official one. The waits were
//! measured once, by the recorder; this test reads numbers and times nothing.

use std::path::PathBuf;
use std::time::Duration;

use recipe_images::RetryPolicy;
use serde_json::Value;

const TOLERANCE: Duration = Duration::from_millis(60);

#[test]
fn schedule_matches_recorded_official_waits() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/conformance/images/network_cases.json");
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let ours = RetryPolicy::default();
    let mut checked = 0;
    for case in &cases {
        let official = &case["official"];
        let single = case["urls"].as_array().is_some_and(|u| u.len() == 1);
        let hits = official["hits"].as_array().map_or(0, Vec::len);
        // One URL retried to the end without redirects: one wait between consecutive hits.
        if case["op"] != "resolve_url" || !single || hits != ours.attempts() {
            continue;
        }
        let waits: Vec<f64> = official["waits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_f64().unwrap())
            .collect();
        assert_eq!(waits.len(), ours.waits.len(), "{}", case["name"]);
        for (theirs, mine) in waits.iter().zip(&ours.waits) {
            let theirs = Duration::from_secs_f64(*theirs);
            let gap = theirs.abs_diff(*mine);
            assert!(
                gap <= TOLERANCE,
                "{}: official wait {theirs:?}, ours {mine:?}",
                case["name"]
            );
        }
        checked += 1;
    }
    assert!(checked >= 6, "only {checked} retried cases recorded");
}
