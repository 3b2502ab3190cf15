//! The `input` of a Responses custom tool call (`apply_patch`), read from the call's JSON
//! arguments as they stream.
//!
//! The parser writes every call's arguments as JSON text. A custom tool takes free text, so
//! arguments that begin with `{"input": "` stand for that parameter's string value: its
//! pieces go out unescaped and everything after its closing quote (other parameters, the `}`)
//! is dropped. Any other arguments (another parameter first, a non-string `input`, no
//! parameters) go out as the JSON text itself. Until the arguments show which case it is,
//! they are held; a call that ends first releases what was held as it is.

/// How a call's arguments begin when they stand for the `input` string.
const PREFIX: &str = "{\"input\": \"";

#[derive(Clone, Debug, PartialEq)]
enum State {
    /// Not decided yet: the arguments so far are a prefix of [`PREFIX`].
    Held(String),
    /// Inside the `input` string; `escape` holds an escape sequence cut between pieces.
    Input { escape: String },
    /// The arguments are not an `input` string: copied as they are.
    Json,
    /// After the `input` string's closing quote: dropped.
    Closed,
}

/// Turns a custom tool call's argument pieces into pieces of its `input`.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomInput {
    state: State,
}

impl Default for CustomInput {
    fn default() -> Self {
        CustomInput {
            state: State::Held(String::new()),
        }
    }
}

impl CustomInput {
    /// One more piece of the JSON arguments; returns the `input` text it adds (may be empty).
    pub fn push(&mut self, args: &str) -> String {
        match &mut self.state {
            State::Held(held) => {
                held.push_str(args);
                if let Some(rest) = held.strip_prefix(PREFIX) {
                    let rest = rest.to_owned();
                    self.state = State::Input {
                        escape: String::new(),
                    };
                    self.unescape(&rest)
                } else if PREFIX.starts_with(held.as_str()) {
                    String::new()
                } else {
                    let text = std::mem::take(held);
                    self.state = State::Json;
                    text
                }
            }
            State::Input { .. } => self.unescape(args),
            State::Json => args.to_owned(),
            State::Closed => String::new(),
        }
    }

    /// The call ended: text still held goes out as it is.
    pub fn finish(&mut self) -> String {
        match std::mem::replace(&mut self.state, State::Closed) {
            State::Held(held) => held,
            _ => String::new(),
        }
    }

    /// The characters of a piece of a JSON string body, up to its closing quote.
    fn unescape(&mut self, piece: &str) -> String {
        let State::Input { escape } = &mut self.state else {
            return String::new();
        };
        let mut out = String::with_capacity(piece.len());
        let mut closed = false;
        for c in piece.chars() {
            if !escape.is_empty() {
                escape.push(c);
                if let Some(done) = decode_escape(escape) {
                    out.extend(done);
                    escape.clear();
                }
                continue;
            }
            match c {
                '\\' => escape.push(c),
                '"' => {
                    closed = true;
                    break;
                }
                c => out.push(c),
            }
        }
        if closed {
            self.state = State::Closed;
        }
        out
    }
}

/// A complete escape sequence (`\n`, `\u00e9`, a surrogate pair `\ud83e\udd80`) as its
/// character (`Some(None)`: a malformed one, dropped), or `None` while it may still go on.
fn decode_escape(seq: &str) -> Option<Option<char>> {
    let body: Vec<char> = seq.chars().skip(1).collect();
    let simple = match body.first()? {
        '"' => '"',
        '\\' => '\\',
        '/' => '/',
        'b' => '\u{8}',
        'f' => '\u{c}',
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'u' => return decode_unicode(&body[1..]),
        _ => return Some(None),
    };
    Some(Some(simple))
}

/// The hex digits (and what follows) of a `\u` escape.
fn decode_unicode(rest: &[char]) -> Option<Option<char>> {
    let hex = |cs: &[char]| -> Option<u32> {
        let s: String = cs.iter().collect();
        u32::from_str_radix(&s, 16).ok()
    };
    if rest.len() < 4 {
        // Wait for the rest of the digits, unless these are not digits.
        return if rest.iter().all(char::is_ascii_hexdigit) {
            None
        } else {
            Some(None)
        };
    }
    let Some(high) = hex(&rest[..4]) else {
        return Some(None);
    };
    if !(0xD800..0xDC00).contains(&high) {
        return Some(Some(char::from_u32(high).unwrap_or('\u{fffd}')));
    }
    // A high surrogate: its low half follows as `\uXXXX`.
    let tail = &rest[4..];
    let expected = ['\\', 'u'];
    if tail.len() < 6 {
        let so_far = tail.len().min(2);
        let may_go_on = tail[..so_far] == expected[..so_far]
            && tail[so_far..].iter().all(char::is_ascii_hexdigit);
        return if may_go_on {
            None
        } else {
            Some(Some('\u{fffd}'))
        };
    }
    let low = (tail[..2] == expected)
        .then(|| hex(&tail[2..6]))
        .flatten()
        .filter(|l| (0xDC00..0xE000).contains(l));
    Some(Some(low.map_or('\u{fffd}', |low| {
        char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)).unwrap_or('\u{fffd}')
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pieces: &[&str]) -> Vec<String> {
        let mut c = CustomInput::default();
        let mut out: Vec<String> = pieces.iter().map(|p| c.push(p)).collect();
        out.push(c.finish());
        out
    }

    #[test]
    fn an_input_string_goes_out_unescaped_and_the_rest_is_dropped() {
        assert_eq!(
            run(&[
                "{",
                "\"input\"",
                ": ",
                "\"",
                "a\\n\\\"",
                "b",
                "\"",
                ", ",
                "\"x\"",
                "}"
            ]),
            ["", "", "", "", "a\n\"", "b", "", "", "", "", ""]
        );
        assert_eq!(
            run(&["{\"input\": \"x\\u00e9\\ud83e\\udd80\"}"]),
            ["xé🦀", ""]
        );
        // An escape cut between pieces.
        assert_eq!(
            run(&["{\"input\": \"a\\", "u00", "e9b"]),
            ["a", "", "éb", ""]
        );
    }

    #[test]
    fn other_arguments_go_out_as_json_once_they_differ() {
        assert_eq!(run(&["{", "\"patch\"", ": "]), ["", "{\"patch\"", ": ", ""]);
        assert_eq!(
            run(&["{", "\"input\"", ": ", "{\"a\": 1}", "}"]),
            ["", "", "", "{\"input\": {\"a\": 1}", "}", ""]
        );
        assert_eq!(run(&["{", "}"]), ["", "{}", ""]);
    }

    #[test]
    fn held_text_goes_out_when_the_call_ends() {
        assert_eq!(run(&["{\"inp"]), ["", "{\"inp"]);
        assert_eq!(run(&["{\"input\": \""]), ["", ""]);
    }
}
