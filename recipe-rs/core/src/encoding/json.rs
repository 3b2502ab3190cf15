//! JSON text as the prompt templates write it: `", "` and `": "` separators, non-ASCII kept raw,
//! and one of two float spellings (the two model generations were trained on different ones).

use serde_json::Value;

/// How a non-integer number is spelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum FloatStyle {
    /// Python `repr`: `1e-05`, `1e+16`, `1000000000000000.0`.
    Python,
    /// Shortest digits, fixed notation for decimal exponents -5..=15 (`0.00001`), otherwise
    /// scientific with an explicit `+` on positive exponents and no zero padding (`1e-7`, `1e+16`).
    Compact,
}

/// Serialise `v` into `out`.
pub fn write_value(out: &mut String, v: &Value, style: FloatStyle) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else if let Some(u) = n.as_u64() {
                out.push_str(&u.to_string());
            } else if let Some(f) = n.as_f64() {
                write_float(out, f, style);
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, x, style);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, x)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(out, k);
                out.push_str(": ");
                write_value(out, x, style);
            }
            out.push('}');
        }
    }
}

/// `v` as a string.
pub fn to_string(v: &Value, style: FloatStyle) -> String {
    let mut s = String::new();
    write_value(&mut s, v, style);
    s
}

/// A JSON string literal; only `"`, `\` and C0 controls are escaped.
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    escape_str_into(out, s);
    out.push('"');
}

/// The body of a JSON string literal (no quotes); only `"`, `\` and C0 controls are escaped.
pub fn escape_str_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
}

/// Shortest round-trip digits of a finite `f` and its decimal exponent: `f = 0.d1d2… × 10^exp`
/// written as (digits, exp) where `exp` is the scientific exponent of the first digit.
fn digits_and_exponent(f: f64) -> (String, i32) {
    // `{:e}` gives the shortest representation that round-trips, e.g. "1.2345e-7".
    let s = format!("{:e}", f.abs());
    let (mantissa, exp) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    (digits, exp.parse().unwrap_or(0))
}

pub fn write_float(out: &mut String, f: f64, style: FloatStyle) {
    if !f.is_finite() {
        // JSON values built by this crate are always finite; keep output well-formed anyway.
        out.push_str("null");
        return;
    }
    if f.is_sign_negative() {
        out.push('-');
    }
    if f == 0.0 {
        out.push_str("0.0");
        return;
    }
    let (digits, exp) = digits_and_exponent(f);
    let fixed = match style {
        FloatStyle::Python => (-4..16).contains(&exp),
        FloatStyle::Compact => (-5..16).contains(&exp),
    };
    if fixed {
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                for _ in digits.len()..int_len {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        match style {
            FloatStyle::Python => {
                out.push(if exp < 0 { '-' } else { '+' });
                out.push_str(&format!("{:02}", exp.abs()));
            }
            FloatStyle::Compact => {
                if exp >= 0 {
                    out.push('+');
                }
                out.push_str(&exp.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn py(f: f64) -> String {
        let mut s = String::new();
        write_float(&mut s, f, FloatStyle::Python);
        s
    }
    fn compact(f: f64) -> String {
        let mut s = String::new();
        write_float(&mut s, f, FloatStyle::Compact);
        s
    }

    #[test]
    fn python_repr() {
        let cases = [
            (1e-7, "1e-07"),
            (1e100, "1e+100"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123.456, "123.456"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (-0.0, "-0.0"),
            (3.0, "3.0"),
            (7e16, "7e+16"),
            (1.2345678901234568e22, "1.2345678901234568e+22"),
            (5e-324, "5e-324"),
        ];
        for (f, want) in cases {
            assert_eq!(py(f), want, "{f}");
        }
    }

    #[test]
    fn compact_style() {
        let cases = [
            (1e-7, "1e-7"),
            (1e-10, "1e-10"),
            (1e100, "1e+100"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (0.00001, "0.00001"),
            (1.5e-5, "0.000015"),
            (100000.0, "100000.0"),
            (-1e-7, "-1e-7"),
        ];
        for (f, want) in cases {
            assert_eq!(compact(f), want, "{f}");
        }
    }

    #[test]
    fn strings_escape_like_python() {
        let mut s = String::new();
        write_str(&mut s, "é\u{2028}\u{7f}\u{1f}\"\\/\n");
        assert_eq!(s, "\"é\u{2028}\u{7f}\\u001f\\\"\\\\/\\n\"");
    }
}
