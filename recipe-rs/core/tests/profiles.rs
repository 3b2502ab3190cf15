//! The model profiles side by side. Every field where the V4 and V4.1 profiles differ is listed
//! in `tests/data/profile_differences.txt`; a change to either profile changes that listing, so
//! it shows up in review as a readable diff rather than only as changed prompts.
//!
//! After a deliberate profile change, rewrite the listing with
//! `UPDATE_PROFILE_DIFFERENCES=1 cargo test -p recipe-core --test profiles`.

use recipe_core::encoding::EncodingVersion;
use recipe_core::profile::ModelProfile;
use recipe_core::ModelVersion;
use serde_json::Value;
use std::collections::BTreeMap;

const LISTING: &str = "tests/data/profile_differences.txt";

/// Every leaf of the profile as `dotted.path -> JSON text`.
fn leaves(profile: &ModelProfile) -> BTreeMap<String, String> {
    fn walk(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
        match v {
            Value::Object(map) => {
                for (k, x) in map {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&path, x, out);
                }
            }
            leaf => {
                out.insert(prefix.to_owned(), leaf.to_string());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk("", &serde_json::to_value(profile).unwrap(), &mut out);
    out
}

/// One block per differing field: the path, then the V4 and V4.1 values (`-` where a field
/// exists in only one of them, as with rules that carry different data).
fn differences(a: &ModelProfile, b: &ModelProfile) -> String {
    let (la, lb) = (leaves(a), leaves(b));
    let mut paths: Vec<&String> = la.keys().chain(lb.keys()).collect();
    paths.sort();
    paths.dedup();
    let mut s = format!(
        "# Fields where the {} and {} profiles differ.\n",
        a.name, b.name
    );
    for path in paths {
        let (x, y) = (la.get(path), lb.get(path));
        if x == y {
            continue;
        }
        let show = |v: Option<&String>| v.map_or("-".to_owned(), String::clone);
        s.push_str(&format!(
            "\n{path}\n  {}: {}\n  {}: {}\n",
            a.name,
            show(x),
            b.name,
            show(y)
        ));
    }
    s
}

#[test]
fn profile_differences_are_listed() {
    let actual = differences(
        EncodingVersion::V4.profile(),
        EncodingVersion::V41.profile(),
    );
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(LISTING);
    if std::env::var_os("UPDATE_PROFILE_DIFFERENCES").is_some() {
        std::fs::write(&path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "the profiles differ from {LISTING}; if the change is meant, rewrite it with \
         UPDATE_PROFILE_DIFFERENCES=1. Listing now:\n{actual}"
    );
}

#[test]
fn every_model_version_has_the_profile_of_its_encoding() {
    for (model, encoding, name) in [
        (ModelVersion::DeepseekV4Pro, EncodingVersion::V4, "V4"),
        (ModelVersion::DeepseekV41Flash, EncodingVersion::V41, "V4.1"),
    ] {
        assert_eq!(EncodingVersion::for_model(model), encoding);
        assert!(std::ptr::eq(model.profile(), encoding.profile()));
        assert_eq!(encoding.profile().name, name);
    }
}

#[test]
fn effort_lines_cover_every_effort() {
    use recipe_core::ReasoningEffort::*;
    let v41 = EncodingVersion::V41.profile();
    assert!(v41.effort_line(Some(Low)).contains(" 50 "));
    for e in [None, Some(High), Some(XHigh)] {
        assert!(v41.effort_line(e).contains(" 75 "));
    }
    assert!(v41.effort_line(Some(Max)).contains(" 100 "));
    let v4 = EncodingVersion::V4.profile();
    assert_eq!(v4.effort_line(Some(Low)), "");
    assert_eq!(v4.effort_line(None), v4.effort_line(Some(XHigh)));
    assert_ne!(v4.effort_line(None), v4.effort_line(Some(Max)));
}
