//! `server.properties` read as `java.util.Properties.load` reads it, since that is how Kafka
//! reads it (`Utils.loadProps`): the file's bytes are ISO-8859-1 characters; a natural line
//! ends at `\n`, `\r` or `\r\n`; a line whose first non-blank character is `#` or `!` is a
//! comment (and never continues); a line ending in an odd number of backslashes continues on
//! the next, whose leading blanks are dropped (inline PEM keys and certificates are written
//! that way); the key ends at the first unescaped `=`, `:` or blank, and one `=` or `:` after
//! the blanks that follow is skipped with the blanks around it; `\t`, `\n`, `\r`, `\f` and
//! `\uXXXX` are escapes, and a backslash before any other character stands for that character.
//! Blanks are space, tab and form feed. A key given twice keeps its last value.

/// Decodes the file's bytes as Java's `Properties.load(InputStream)` does: ISO-8859-1.
pub fn decode_latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// The key/value pairs of a properties text, in file order.
pub fn parse_properties(text: &str) -> Vec<(String, String)> {
    logical_lines(text)
        .into_iter()
        .map(|line| split_key_value(&line))
        .collect()
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

/// Splits the text into natural lines, without their terminators.
fn natural_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let bytes = text.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                lines.push(&text[start..i]);
                start = i + 1;
            }
            b'\r' => {
                lines.push(&text[start..i]);
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < bytes.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// Whether a line ends in an odd number of backslashes, so continues on the next.
fn continues(line: &str) -> bool {
    line.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// Joins continued lines; drops blank lines and comments. The escapes stay for the split.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for raw in natural_lines(text) {
        let line = raw.trim_start_matches(is_blank);
        match current.as_mut() {
            Some(joined) => {
                // The continuing backslash goes; the next line's leading blanks went above.
                joined.pop();
                joined.push_str(line);
            }
            None => {
                if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                    continue;
                }
                current = Some(line.to_string());
            }
        }
        if !continues(line) {
            out.extend(current.take());
        }
    }
    // A backslash on the file's last line continues into nothing: Java drops it.
    if let Some(mut joined) = current {
        joined.pop();
        out.push(joined);
    }
    out
}

/// Splits one logical line into its unescaped key and value.
fn split_key_value(line: &str) -> (String, String) {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let mut key_end = chars.len();
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            c if c == '=' || c == ':' || is_blank(c) => {
                key_end = i;
                break;
            }
            _ => i += 1,
        }
    }
    let key_end = key_end.min(chars.len());
    let mut value_start = key_end;
    while value_start < chars.len() && is_blank(chars[value_start]) {
        value_start += 1;
    }
    if value_start < chars.len() && matches!(chars[value_start], '=' | ':') {
        value_start += 1;
        while value_start < chars.len() && is_blank(chars[value_start]) {
            value_start += 1;
        }
    }
    (unescape(&chars[..key_end]), unescape(&chars[value_start..]))
}

fn unescape(chars: &[char]) -> String {
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(&next) = chars.get(i) else {
            break;
        };
        i += 1;
        match next {
            't' => out.push('\t'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'f' => out.push('\u{c}'),
            'u' => {
                let hex: String = chars[i..chars.len().min(i + 4)].iter().collect();
                match u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                {
                    Some(code) => {
                        // Half of a UTF-16 surrogate pair has no char of its own: U+FFFD.
                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        i += 4;
                    }
                    // Java throws "Malformed \uxxxx encoding"; sluice keeps the text.
                    None => out.push('u'),
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse_properties(text)
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn separators_and_comments() {
        assert_eq!(
            pairs("# c\n! c\n\n  a=1\nb : two\nc three\nd\t=\tfour\ne\n f:=g\n"),
            vec![
                kv("a", "1"),
                kv("b", "two"),
                kv("c", "three"),
                kv("d", "four"),
                kv("e", ""),
                kv("f", "=g"),
            ]
        );
    }

    #[test]
    fn continuation_lines_join_without_leading_blanks() {
        let text = "ssl.keystore.key=-----BEGIN PRIVATE KEY----- \\\n    MIIEv \\\n  QIBAD \\\n  -----END PRIVATE KEY-----\nnext=1\n";
        assert_eq!(
            pairs(text),
            vec![
                kv(
                    "ssl.keystore.key",
                    "-----BEGIN PRIVATE KEY----- MIIEv QIBAD -----END PRIVATE KEY-----"
                ),
                kv("next", "1"),
            ]
        );
        // An even number of backslashes is an escaped backslash, not a continuation.
        assert_eq!(pairs("a=b\\\\\nc=d"), vec![kv("a", "b\\"), kv("c", "d")]);
        // Comments never continue; CR and CRLF end lines too.
        assert_eq!(
            pairs("# x \\\na=1\r\nb=2\rc=3"),
            vec![kv("a", "1"), kv("b", "2"), kv("c", "3")]
        );
    }

    #[test]
    fn escapes() {
        assert_eq!(
            pairs("my\\ key\\=x=a\\tb\\u0041\\q\\:"),
            vec![kv("my key=x", "a\tbAq:")]
        );
        assert_eq!(pairs("k=caf\u{e9}"), vec![kv("k", "caf\u{e9}")]);
        assert_eq!(decode_latin1(&[0x63, 0xe9]), "c\u{e9}");
    }
}
