//! The principal of a TLS client certificate, as Kafka builds it: the subject's distinguished
//! name in RFC 2253 form, as Java's `X500Principal.getName()` writes it, mapped by
//! `ssl.principal.mapping.rules`.
//!
//! The rules are a comma-separated list, tried in order, the first that applies wins:
//! `DEFAULT` (the whole DN) or `RULE:<pattern>/<replacement>/[L|U]`, which applies when the
//! pattern matches the whole DN and gives every match replaced, lower- or upper-cased with `L`
//! or `U`. Replacements use `$1`-style group references; a reference to a group the pattern
//! does not have is shortened digit by digit, and taken as text if none fits, as Kafka does.
//! With no rule applying the connection fails. Patterns are Rust regular expressions, which
//! share Java's syntax for everything these rules are written with (no look-around or
//! back-references).

use regex::Regex;
use x509_parser::prelude::*;

enum Rule {
    Default,
    Pattern {
        pattern: Regex,
        replacement: String,
        lower: bool,
        upper: bool,
    },
}

/// `ssl.principal.mapping.rules`, parsed.
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

/// How one rule is written: Kafka's own pattern for it (Java regex syntax that Rust's
/// `regex` reads the same way).
const RULE_PATTERN: &str = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)";

impl PrincipalMapper {
    pub fn parse(rules: &str) -> Result<PrincipalMapper, String> {
        let splitter =
            Regex::new(&format!(r"\s*({RULE_PATTERN})\s*(,\s*|$)")).map_err(|e| e.to_string())?;
        let parser = Regex::new(&format!("^(?:{RULE_PATTERN})")).map_err(|e| e.to_string())?;
        let mut parsed = Vec::new();
        for found in splitter.captures_iter(rules.trim()) {
            let Some(rule) = found.get(1).map(|m| m.as_str()) else {
                continue;
            };
            let m = parser
                .captures(rule)
                .ok_or_else(|| format!("Invalid rule: {rule}"))?;
            let end = m.get(0).map_or(0, |g| g.end());
            if end != rule.len() {
                return Err(format!(
                    "Invalid rule: `{rule}`, unmatched substring: `{}`",
                    &rule[end..]
                ));
            }
            if m.get(1).is_some() {
                parsed.push(Rule::Default);
            } else if let Some(pattern) = m.get(2) {
                let case = m.get(6).map_or("", |g| g.as_str());
                let pattern = Regex::new(&format!("^(?:{})$", pattern.as_str()))
                    .map_err(|e| format!("Invalid rule: {rule}: {e}"))?;
                parsed.push(Rule::Pattern {
                    replacement: m.get(4).map_or("", |g| g.as_str()).to_string(),
                    pattern,
                    lower: case == "L",
                    upper: case == "U",
                });
            }
            // Anything else is an empty rule, which Kafka ignores.
        }
        Ok(PrincipalMapper { rules: parsed })
    }

    /// The principal name for a DN, or Kafka's "No rules apply" when none applies.
    pub fn name(&self, dn: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Pattern {
                    pattern,
                    replacement,
                    lower,
                    upper,
                } => {
                    let Some(caps) = pattern.captures(dn) else {
                        continue;
                    };
                    let groups = caps.len() - 1;
                    let mut name = pattern
                        .replace_all(dn, rust_replacement(replacement, groups).as_str())
                        .into_owned();
                    if *lower {
                        name = name.to_lowercase();
                    } else if *upper {
                        name = name.to_uppercase();
                    }
                    return Ok(name);
                }
            }
        }
        Err(format!("No rules apply to {dn}"))
    }
}

/// A Java replacement string (`$1`, `\$` for a literal dollar) in Rust's syntax (`${1}`,
/// `$$`), with Kafka's treatment of references past the pattern's groups.
fn rust_replacement(java: &str, groups: usize) -> String {
    let chars: Vec<char> = java.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                push_literal(&mut out, chars[i + 1]);
                i += 2;
            }
            '$' if chars.get(i + 1).is_some_and(|c| c.is_ascii_digit()) => {
                let digits: String = chars[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .collect();
                let mut used = digits.len();
                let mut index: usize = digits.parse().unwrap_or(usize::MAX);
                while index > groups && used > 1 {
                    used -= 1;
                    index = digits[..used].parse().unwrap_or(usize::MAX);
                }
                if index <= groups {
                    out.push_str(&format!("${{{index}}}"));
                    for c in digits[used..].chars() {
                        push_literal(&mut out, c);
                    }
                } else {
                    // No such group: the reference is text.
                    out.push_str("$$");
                    out.push_str(&digits);
                }
                i += 1 + digits.len();
            }
            c => {
                push_literal(&mut out, c);
                i += 1;
            }
        }
    }
    out
}

fn push_literal(out: &mut String, c: char) {
    if c == '$' {
        out.push_str("$$");
    } else {
        out.push(c);
    }
}

/// The subject DN of a DER certificate as Java's `X500Principal.getName()` (RFC 2253) writes
/// it: RDNs last first, joined by `,`; multi-valued RDNs by `+`; RFC 2253's keywords (CN, C,
/// L, ST, O, OU, STREET, DC, UID) by name and every other attribute by its dotted OID with
/// `#` and the hex of its DER value; special characters escaped with a backslash.
pub fn subject_dn(der: &[u8]) -> Result<String, String> {
    let (_, cert) =
        X509Certificate::from_der(der).map_err(|e| format!("client certificate: {e}"))?;
    let rdns: Vec<String> = cert
        .subject()
        .iter_rdn()
        .map(|rdn| {
            rdn.iter()
                .map(|attr| {
                    let oid = attr.attr_type().to_id_string();
                    match keyword(&oid) {
                        Some(name) => {
                            let value = attr.as_str().map(str::to_string).unwrap_or_else(|_| {
                                String::from_utf8_lossy(attr.attr_value().data).into_owned()
                            });
                            format!("{name}={}", escape(&value))
                        }
                        None => format!("{oid}=#{}", hex_der(attr.attr_value())),
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Ok(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

fn escape(value: &str) -> String {
    let mut out = String::new();
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The hex of an attribute value's DER encoding (tag, length, content).
fn hex_der(value: &x509_parser::der_parser::asn1_rs::Any<'_>) -> String {
    let content = value.data;
    let mut der = vec![value.header.raw_tag().map_or(0x0c, |t| t[0])];
    let len = content.len();
    if len < 0x80 {
        der.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|&b| b == 0)
            .collect();
        der.push(0x80 | bytes.len() as u8);
        der.extend(bytes);
    }
    der.extend_from_slice(content);
    der.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_rule_examples() {
        let m = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT",
        )
        .unwrap();
        assert_eq!(
            m.name("CN=kafka-server1,OU=ServiceUsers,O=org,C=US")
                .unwrap(),
            "kafka-server1"
        );
        assert_eq!(
            m.name("CN=duke,OU=JavaSoft,O=Sun Microsystems,L=x,ST=y,C=US")
                .unwrap(),
            "duke@javasoft"
        );
        assert_eq!(m.name("cN=Admin,O=x").unwrap(), "admin");
        assert_eq!(m.name("OU=nobody").unwrap(), "OU=nobody");
        let upper = PrincipalMapper::parse("RULE:^CN=(.*)$/$1/U").unwrap();
        assert_eq!(upper.name("CN=alice").unwrap(), "ALICE");
        assert!(upper.name("O=x").is_err(), "no rule applies");
        assert!(PrincipalMapper::parse("RULE:a/b/L ,DEFAULT").is_ok());
        let literal = PrincipalMapper::parse("RULE:^CN=(.*)$/$1$5\\$x/").unwrap();
        assert_eq!(literal.name("CN=bob").unwrap(), "bob$5$x");
    }

    #[test]
    fn rfc2253_escapes() {
        assert_eq!(escape("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape(" x "), "\\ x\\ ");
        assert_eq!(escape("#1"), "\\#1");
    }
}
