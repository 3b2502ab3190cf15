//! Pieces of llguidance's Lark dialect: quoted literals, token references, rule names.

/// `s` as a Lark string literal. llguidance reads Lark strings as JSON strings, so this is the
/// JSON spelling of `s`.
pub fn literal(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// A reference to one token by ID: the only way a control token enters a grammar.
pub fn token(id: u32) -> String {
    format!("<[{id}]>")
}

/// `s` inside a Lark `/…/` regex: every character matched literally.
pub fn regex_escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$'
            | '#' | '&' | '-' | '~' | '/' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}

/// A regular expression as a Lark `/…/` literal: `/` escaped unless it already is.
pub fn regex(rx: &str) -> String {
    let mut out = String::with_capacity(rx.len() + 2);
    out.push('/');
    let mut escaped = false;
    for c in rx.chars() {
        if c == '/' && !escaped {
            out.push('\\');
        }
        if c == '\n' {
            out.push_str("\\n");
        } else {
            out.push(c);
        }
        escaped = c == '\\' && !escaped;
    }
    out.push('/');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_escape_quotes_and_controls() {
        assert_eq!(literal("a\"b\\c\nd"), r#""a\"b\\c\nd""#);
        assert_eq!(literal("｜DSML｜"), "\"｜DSML｜\"");
        assert_eq!(literal("\u{1}"), "\"\\u0001\"");
    }

    #[test]
    fn regex_slashes_are_escaped_once() {
        assert_eq!(regex("a/b"), r"/a\/b/");
        assert_eq!(regex(r"a\/b"), r"/a\/b/");
        assert_eq!(regex(r"a\\/b"), r"/a\\\/b/");
        assert_eq!(regex_escaped("a.b/"), r"a\.b\/");
    }
}
