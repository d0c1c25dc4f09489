//! SASL/OAUTHBEARER (RFC 7628) as Kafka's `OAuthBearerSaslServer` runs it, with either of
//! Kafka's two token validators:
//!
//! - the default, unsecured one (`OAuthBearerUnsecuredValidatorCallbackHandler`): the token
//!   must be an unsigned JWS (`alg: none`, empty signature) whose claims have the principal
//!   claim (`sub`, or the JAAS option `unsecuredValidatorPrincipalClaimName`) as a string and
//!   `exp` as a number in the future, `iat` (if present) not in the future and before `exp`,
//!   and every scope of `unsecuredValidatorRequiredScope` in the scope claim; clock skew is
//!   `unsecuredValidatorAllowableClockSkewMs`. It is for tests, as in Kafka.
//! - signed JWTs (KIP-768, `sasl.server.callback.handler.class` set to Kafka's
//!   `OAuthBearerValidatorCallbackHandler`): the signature must verify against a key of the
//!   JWKS at `sasl.oauthbearer.jwks.endpoint.url` (a `file:` URL, re-read every
//!   `sasl.oauthbearer.jwks.endpoint.refresh.ms`), `exp` and `iat` must be present, `aud`
//!   and `iss` must match `sasl.oauthbearer.expected.audience` / `.issuer` when set, within
//!   `sasl.oauthbearer.clock.skew.seconds`; the principal is `sasl.oauthbearer.sub.claim.name`.
//!
//! A token that fails is answered with a JSON challenge (`{"status":"invalid_token"}`); the
//! client answers with one `0x01` byte, and the exchange fails with that JSON as its message.
//! The token's `exp` is the credential's lifetime, which bounds the session (KIP-368).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::Value;

use crate::disk::Disk;

/// How tokens are validated on one listener.
pub enum Validator {
    Unsecured {
        principal_claim: String,
        scope_claim: String,
        required_scope: Vec<String>,
        clock_skew_ms: i64,
    },
    Jwks(JwksValidator),
}

pub struct JwksValidator {
    pub disk: Disk,
    pub path: PathBuf,
    pub refresh_ms: i64,
    pub audience: Vec<String>,
    pub issuer: Option<String>,
    pub sub_claim: String,
    pub scope_claim: String,
    pub clock_skew_seconds: u64,
    /// The key set and when it was read (ms).
    pub keys: Mutex<Option<(jsonwebtoken::jwk::JwkSet, i64)>>,
}

/// A valid token: its principal and expiry.
pub struct ValidToken {
    pub principal: String,
    pub expires_ms: i64,
}

/// Why a token was refused: the challenge's JSON status and, for a missing scope, the scope.
pub struct Refusal {
    pub status: &'static str,
    pub scope: Option<String>,
    /// For the log only; never sent.
    pub reason: String,
}

fn invalid(reason: impl Into<String>) -> Refusal {
    Refusal {
        status: "invalid_token",
        scope: None,
        reason: reason.into(),
    }
}

impl Refusal {
    /// Kafka's JSON error (`jsonErrorResponse`).
    pub fn json(&self) -> String {
        match &self.scope {
            None => format!("{{\"status\":\"{}\"}}", self.status),
            Some(scope) => format!("{{\"status\":\"{}\", \"scope\":\"{scope}\"}}", self.status),
        }
    }
}

impl Validator {
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<ValidToken, Refusal> {
        match self {
            Validator::Unsecured {
                principal_claim,
                scope_claim,
                required_scope,
                clock_skew_ms,
            } => {
                let claims = unsecured_claims(token)?;
                check_unsecured(
                    &claims,
                    principal_claim,
                    scope_claim,
                    required_scope,
                    *clock_skew_ms,
                    now_ms,
                )
            }
            Validator::Jwks(v) => v.validate(token, now_ms),
        }
    }
}

/// The claims of an unsecured JWS: `base64url(header).base64url(claims).` with `alg: none`.
fn unsecured_claims(token: &str) -> Result<BTreeMap<String, Value>, Refusal> {
    let parts: Vec<&str> = token.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err(invalid("not a compact JWS"));
    };
    if !signature.is_empty() {
        return Err(invalid("an unsecured JWS has an empty signature"));
    }
    let json = |part: &str| -> Result<BTreeMap<String, Value>, Refusal> {
        let bytes = URL_SAFE_NO_PAD
            .decode(part.trim_end_matches('='))
            .map_err(|_| invalid("not base64url"))?;
        serde_json::from_slice(&bytes).map_err(|_| invalid("not a JSON object"))
    };
    let header = json(header)?;
    if header.get("alg").and_then(Value::as_str) != Some("none") {
        return Err(invalid("the unsecured validator accepts only alg none"));
    }
    json(claims)
}

fn number(claims: &BTreeMap<String, Value>, name: &str) -> Result<Option<f64>, Refusal> {
    match claims.get(name) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| invalid(format!("The {name} claim had the incorrect type"))),
    }
}

fn scopes(claims: &BTreeMap<String, Value>, claim: &str) -> Vec<String> {
    match claims.get(claim) {
        Some(Value::String(s)) => s
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        _ => Vec::new(),
    }
}

fn check_unsecured(
    claims: &BTreeMap<String, Value>,
    principal_claim: &str,
    scope_claim: &str,
    required_scope: &[String],
    skew_ms: i64,
    now_ms: i64,
) -> Result<ValidToken, Refusal> {
    let principal = match claims.get(principal_claim) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => {
            return Err(invalid(format!(
                "The {principal_claim} claim had the incorrect type"
            )))
        }
        None => {
            return Err(invalid(format!(
                "Required claim missing: {principal_claim}"
            )))
        }
    };
    let iat = number(claims, "iat")?;
    let exp = number(claims, "exp")?.ok_or_else(|| invalid("Required claim missing: exp"))?;
    if let Some(iat) = iat {
        if 1000.0 * iat > (now_ms + skew_ms) as f64 {
            return Err(invalid("The Issued At value was after the indicated time"));
        }
        if exp <= iat {
            return Err(invalid(
                "The Expiration Time was not after the Issued At time",
            ));
        }
    }
    if (now_ms - skew_ms) as f64 >= 1000.0 * exp {
        return Err(invalid("the token has expired"));
    }
    let have = scopes(claims, scope_claim);
    if required_scope.iter().any(|s| !have.contains(s)) {
        return Err(Refusal {
            status: "insufficient_scope",
            scope: Some(format!("[{}]", required_scope.join(", "))),
            reason: "a required scope is missing".into(),
        });
    }
    Ok(ValidToken {
        principal,
        expires_ms: (1000.0 * exp) as i64,
    })
}

impl JwksValidator {
    fn key_set(&self, now_ms: i64) -> Result<jsonwebtoken::jwk::JwkSet, Refusal> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((set, read_ms)) = keys.as_ref() {
            if now_ms - read_ms < self.refresh_ms {
                return Ok(set.clone());
            }
        }
        let bytes = self
            .disk
            .read(&self.path)
            .map_err(|e| invalid(format!("JWKS {}: {e}", self.path.display())))?;
        let set: jsonwebtoken::jwk::JwkSet = serde_json::from_slice(&bytes)
            .map_err(|e| invalid(format!("JWKS {}: {e}", self.path.display())))?;
        *keys = Some((set.clone(), now_ms));
        Ok(set)
    }

    fn validate(&self, token: &str, now_ms: i64) -> Result<ValidToken, Refusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| invalid(e.to_string()))?;
        let set = self.key_set(now_ms)?;
        let jwk = match &header.kid {
            Some(kid) => set.find(kid),
            None => set.keys.first(),
        }
        .ok_or_else(|| invalid("no key of the JWKS matches the token's kid"))?;
        let key = jsonwebtoken::DecodingKey::from_jwk(jwk).map_err(|e| invalid(e.to_string()))?;
        let mut validation = jsonwebtoken::Validation::new(header.alg);
        validation.leeway = self.clock_skew_seconds;
        validation.set_required_spec_claims(&["exp", "iat"]);
        if self.audience.is_empty() {
            validation.validate_aud = false;
        } else {
            validation.set_audience(&self.audience);
        }
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
        }
        let data = jsonwebtoken::decode::<BTreeMap<String, Value>>(token, &key, &validation)
            .map_err(|e| invalid(e.to_string()))?;
        let claims = data.claims;
        let principal = claims
            .get(&self.sub_claim)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid(format!("Required claim missing: {}", self.sub_claim)))?
            .to_string();
        let _ = scopes(&claims, &self.scope_claim);
        let exp = number(&claims, "exp")?.unwrap_or(0.0);
        let _ = now_ms;
        Ok(ValidToken {
            principal,
            expires_ms: (1000.0 * exp) as i64,
        })
    }
}

/// The client's initial response: `n,[a=<authzid>],` then `\x01`-separated `key=value`
/// pairs (`auth=Bearer <token>` among them) and a final `\x01`.
pub struct InitialResponse {
    pub authzid: String,
    pub token: String,
}

pub fn parse_initial_response(message: &[u8]) -> Option<InitialResponse> {
    let text = std::str::from_utf8(message).ok()?;
    let rest = text.strip_prefix("n,")?;
    let (authz, pairs) = rest.split_once(',')?;
    let authzid = match authz {
        "" => String::new(),
        a => a.strip_prefix("a=")?.to_string(),
    };
    let pairs = pairs.strip_prefix('\u{1}')?.strip_suffix("\u{1}\u{1}")?;
    let mut token = None;
    for pair in pairs.split('\u{1}') {
        let (key, value) = pair.split_once('=')?;
        if !key.chars().all(|c| c.is_ascii_alphabetic()) || key.is_empty() {
            return None;
        }
        if key == "auth" {
            let (scheme, value) = value.split_once(' ')?;
            let value = value.trim_start_matches(' ');
            let valid = !value.is_empty()
                && value.chars().all(|c| {
                    c.is_ascii_alphanumeric()
                        || matches!(c, '-' | '_' | '.' | '~' | '+' | '/' | '=')
                });
            if !scheme.eq_ignore_ascii_case("bearer") || !valid {
                return None;
            }
            token = Some(value.to_string());
        }
    }
    Some(InitialResponse {
        authzid,
        token: token?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unsecured(claims: &str) -> String {
        format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims)
        )
    }

    fn default_validator() -> Validator {
        Validator::Unsecured {
            principal_claim: "sub".into(),
            scope_claim: "scope".into(),
            required_scope: vec!["test".into()],
            clock_skew_ms: 0,
        }
    }

    #[test]
    fn unsecured_tokens() {
        let v = default_validator();
        let now_ms = 1_000_000_000_000;
        let good =
            unsecured(r#"{"sub":"alice","exp":1000000600,"iat":1000000000,"scope":"test other"}"#);
        let ok = v.validate(&good, now_ms).ok().unwrap();
        assert_eq!(
            (ok.principal.as_str(), ok.expires_ms),
            ("alice", 1_000_000_600_000)
        );
        let expired = unsecured(r#"{"sub":"alice","exp":999999999,"scope":"test"}"#);
        assert_eq!(
            v.validate(&expired, now_ms).err().unwrap().json(),
            r#"{"status":"invalid_token"}"#
        );
        let no_scope = unsecured(r#"{"sub":"alice","exp":1000000600}"#);
        assert_eq!(
            v.validate(&no_scope, now_ms).err().unwrap().json(),
            r#"{"status":"insufficient_scope", "scope":"[test]"}"#
        );
        assert!(v
            .validate(&unsecured(r#"{"exp":1000000600,"scope":"test"}"#), now_ms)
            .is_err());
        assert!(v.validate("a.b.c", now_ms).is_err());
    }

    #[test]
    fn initial_response() {
        let r = parse_initial_response(b"n,,\x01auth=Bearer abc.def.\x01\x01").unwrap();
        assert_eq!((r.authzid.as_str(), r.token.as_str()), ("", "abc.def."));
        let r = parse_initial_response(b"n,a=bob,\x01host=x\x01auth=Bearer t\x01\x01").unwrap();
        assert_eq!(r.authzid, "bob");
        assert!(parse_initial_response(b"n,,\x01auth=Basic t\x01\x01").is_none());
        assert!(parse_initial_response(b"n,,\x01\x01").is_none());
    }
}
