//! `sasl.jaas.config` values: `<LoginModule class> <flag> key="value" ...;`, possibly several
//! modules, as Kafka's `JaasConfig` reads them (quoted values with `\"` escapes, or bare
//! words; the flag is required, requisite, sufficient or optional).

use std::collections::BTreeMap;

/// One login module of a JAAS configuration.
#[derive(Debug, PartialEq)]
pub struct LoginModule {
    pub class: String,
    pub options: BTreeMap<String, String>,
}

/// Parses a `sasl.jaas.config` value.
pub fn parse(text: &str) -> Result<Vec<LoginModule>, String> {
    let tokens = tokenize(text)?;
    let mut modules = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let class = word(&tokens, i)?;
        let flag = word(&tokens, i + 1)?;
        if !matches!(
            flag.to_ascii_lowercase().as_str(),
            "required" | "requisite" | "sufficient" | "optional"
        ) {
            return Err(format!(
                "Invalid login module control flag '{flag}' in JAAS config"
            ));
        }
        i += 2;
        let mut options = BTreeMap::new();
        loop {
            match tokens.get(i) {
                Some(Token::Semicolon) => {
                    i += 1;
                    break;
                }
                Some(Token::Word(key)) => {
                    if tokens.get(i + 1) != Some(&Token::Equals) {
                        return Err(format!(
                            "Value not specified for key '{key}' in JAAS config"
                        ));
                    }
                    let value = match tokens.get(i + 2) {
                        Some(Token::Word(v)) | Some(Token::Quoted(v)) => v.clone(),
                        _ => {
                            return Err(format!(
                                "Value not specified for key '{key}' in JAAS config"
                            ))
                        }
                    };
                    options.insert(key.clone(), value);
                    i += 3;
                }
                _ => return Err("JAAS config entry not terminated by semi-colon".into()),
            }
        }
        modules.push(LoginModule {
            class: class.to_string(),
            options,
        });
    }
    if modules.is_empty() {
        return Err("JAAS config property does not contain any login modules".into());
    }
    Ok(modules)
}

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

fn word(tokens: &[Token], i: usize) -> Result<&str, String> {
    match tokens.get(i) {
        Some(Token::Word(w)) => Ok(w),
        _ => Err("Invalid JAAS config: expected a login module and its control flag".into()),
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '=' => {
                chars.next();
                tokens.push(Token::Equals);
            }
            ';' => {
                chars.next();
                tokens.push(Token::Semicolon);
            }
            '"' | '\'' => {
                let quote = c;
                chars.next();
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err("Invalid JAAS config: unterminated quoted value".into()),
                        Some('\\') => value.extend(chars.next()),
                        Some(ch) if ch == quote => break,
                        Some(ch) => value.push(ch),
                    }
                }
                tokens.push(Token::Quoted(value));
            }
            _ => {
                let mut value = String::new();
                while let Some(&ch) = chars.peek() {
                    if ch.is_whitespace() || ch == '=' || ch == ';' || ch == '"' {
                        break;
                    }
                    value.push(ch);
                    chars.next();
                }
                tokens.push(Token::Word(value));
            }
        }
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_plain_line() {
        let modules = parse(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a\"b";"#,
        )
        .unwrap();
        assert_eq!(modules.len(), 1);
        assert_eq!(
            modules[0].class,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(modules[0].options["user_alice"], "a\"b");
        assert_eq!(modules[0].options["username"], "admin");
        assert!(parse("x required a=b").is_err(), "no semicolon");
        assert!(parse("x maybe;").is_err());
        assert_eq!(
            parse("m optional unsecuredLoginStringClaim_sub=alice;").unwrap()[0].options
                ["unsecuredLoginStringClaim_sub"],
            "alice"
        );
    }
}
