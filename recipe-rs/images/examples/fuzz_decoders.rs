//! Long fuzz run of the decoders (bounded): `cargo run --release -p recipe-images --example
//! fuzz_decoders -- [CASES] [SEED]` (default 100000 cases, seed 1). Prints the counts; a panic
//! or a crash ends the run with a failure.

#[path = "support/fuzz.rs"]
mod fuzz_support;

fn main() {
    let mut args = std::env::args().skip(1);
    let cases = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let seed = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let inputs = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/conformance/images/inputs");
    let start = std::time::Instant::now();
    let (n, decoded) = fuzz_support::run(&inputs, cases, seed);
    println!(
        "{n} mutated inputs (seed {seed}), {decoded} decoded, {} rejected, no crash, {:.1}s",
        n - decoded,
        start.elapsed().as_secs_f64()
    );
}
