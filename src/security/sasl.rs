//! The SASL mechanisms of one listener and the server side of one exchange.
//!
//! A listener's mechanisms are its `sasl.enabled.mechanisms` (Kafka's default, GSSAPI, is not
//! implemented: it is left out with a warning, so a listener must name its mechanisms, as
//! Kafka's docs tell). Their settings are Kafka's per-mechanism keys:
//! - PLAIN: the users are the `user_<name>="<password>"` options of the PlainLoginModule in
//!   `listener.name.<l>.plain.sasl.jaas.config` (required, as Kafka requires it);
//! - SCRAM-SHA-256/512: credentials from the store AlterUserScramCredentials fills;
//! - OAUTHBEARER: `oauthbearer::Validator`, chosen by
//!   `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`;
//! - `connections.max.reauth.ms` per mechanism (KIP-368).
//!
//! PLAIN's messages are Kafka's `PlainSaslServer`'s; every other failure is a credential
//! failure whose text the client never sees beyond Kafka's generic one.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use super::jaas;
use super::oauthbearer::{parse_initial_response, JwksValidator, Validator};
use super::scram::{ScramFailure, ScramMechanism, ScramServer, ScramStep};
use super::scram_store::ScramStore;
use crate::config::{Config, Listener};
use crate::disk::Disk;

pub const PLAIN: &str = "PLAIN";
pub const OAUTHBEARER: &str = "OAUTHBEARER";

/// Kafka's callback handler for signed tokens, under its 4.x and its earlier package.
const JWT_VALIDATOR_CLASSES: [&str; 2] = [
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
];

/// One SASL listener's mechanisms and their settings.
pub struct ListenerSasl {
    /// The enabled mechanisms, in configured order, as the handshake lists them.
    pub enabled: Vec<String>,
    plain_users: BTreeMap<String, String>,
    reauth_ms: BTreeMap<String, i64>,
    oauth: Option<Validator>,
}

impl ListenerSasl {
    pub fn load(config: &Config, listener: &Listener, disk: &Disk) -> Result<ListenerSasl, String> {
        let name = &listener.name;
        let mut enabled = Vec::new();
        let list = config
            .listener_value(name, "sasl.enabled.mechanisms")
            .unwrap_or("GSSAPI");
        for mechanism in list.split(',').map(str::trim).filter(|m| !m.is_empty()) {
            match mechanism {
                PLAIN | OAUTHBEARER => enabled.push(mechanism.to_string()),
                m if ScramMechanism::from_name(m).is_some() => enabled.push(m.to_string()),
                other => tracing::warn!(
                    listener = %name,
                    mechanism = other,
                    "sasl.enabled.mechanisms: mechanism not implemented by sluice; left out"
                ),
            }
        }
        let mut plain_users = BTreeMap::new();
        if enabled.iter().any(|m| m == PLAIN) {
            let jaas_config = config
                .mechanism_only_value(name, PLAIN, "sasl.jaas.config")
                .ok_or_else(|| {
                    format!(
                        "listener {name}: PLAIN needs listener.name.{}.plain.sasl.jaas.config",
                        name.to_ascii_lowercase()
                    )
                })?;
            for module in jaas::parse(jaas_config).map_err(|e| format!("listener {name}: {e}"))? {
                for (key, value) in module.options {
                    if let Some(user) = key.strip_prefix("user_") {
                        plain_users.insert(user.to_string(), value);
                    }
                }
            }
        }
        let mut reauth_ms = BTreeMap::new();
        for mechanism in &enabled {
            let value = config
                .mechanism_value(name, mechanism, "connections.max.reauth.ms")
                .unwrap_or("0");
            let ms: i64 = value
                .parse()
                .map_err(|_| format!("connections.max.reauth.ms: cannot parse '{value}'"))?;
            reauth_ms.insert(mechanism.clone(), ms);
        }
        let oauth = if enabled.iter().any(|m| m == OAUTHBEARER) {
            Some(oauth_validator(config, name, disk)?)
        } else {
            None
        };
        Ok(ListenerSasl {
            enabled,
            plain_users,
            reauth_ms,
            oauth,
        })
    }

    pub fn is_enabled(&self, mechanism: &str) -> bool {
        self.enabled.iter().any(|m| m == mechanism)
    }

    /// `connections.max.reauth.ms` for a mechanism; 0 when off.
    pub fn reauth_ms(&self, mechanism: &str) -> i64 {
        self.reauth_ms.get(mechanism).copied().unwrap_or(0)
    }

    /// A new exchange for an enabled mechanism.
    pub fn start(&self, mechanism: &str) -> Option<Exchange> {
        if !self.is_enabled(mechanism) {
            return None;
        }
        Some(match mechanism {
            PLAIN => Exchange::Plain,
            OAUTHBEARER => Exchange::OAuth { error: None },
            m => Exchange::Scram(ScramServer::new(ScramMechanism::from_name(m)?)),
        })
    }
}

fn oauth_validator(config: &Config, listener: &str, disk: &Disk) -> Result<Validator, String> {
    let handler =
        config.mechanism_only_value(listener, OAUTHBEARER, "sasl.server.callback.handler.class");
    let value = |key: &str| config.mechanism_value(listener, OAUTHBEARER, key);
    match handler {
        None => {
            let options =
                match config.mechanism_only_value(listener, OAUTHBEARER, "sasl.jaas.config") {
                    Some(text) => jaas::parse(text)
                        .map_err(|e| format!("listener {listener}: {e}"))?
                        .into_iter()
                        .flat_map(|m| m.options)
                        .collect(),
                    None => BTreeMap::new(),
                };
            let option = |k: &str| options.get(k).map(String::as_str);
            Ok(Validator::Unsecured {
                principal_claim: option("unsecuredValidatorPrincipalClaimName")
                    .unwrap_or("sub")
                    .to_string(),
                scope_claim: option("unsecuredValidatorScopeClaimName")
                    .unwrap_or("scope")
                    .to_string(),
                required_scope: option("unsecuredValidatorRequiredScope")
                    .unwrap_or("")
                    .split(' ')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
                clock_skew_ms: option("unsecuredValidatorAllowableClockSkewMs")
                    .unwrap_or("0")
                    .parse()
                    .map_err(|_| {
                        "unsecuredValidatorAllowableClockSkewMs: not a number".to_string()
                    })?,
            })
        }
        Some(class) if JWT_VALIDATOR_CLASSES.contains(&class) => {
            let url = value("sasl.oauthbearer.jwks.endpoint.url").ok_or(
                "OAuthBearerValidatorCallbackHandler needs sasl.oauthbearer.jwks.endpoint.url",
            )?;
            let path = url.strip_prefix("file://").or_else(|| url.strip_prefix("file:")).ok_or_else(|| {
                format!(
                    "sasl.oauthbearer.jwks.endpoint.url: sluice reads key sets from file: URLs, not '{url}'"
                )
            })?;
            let number = |key: &str, default: &str| -> Result<i64, String> {
                value(key)
                    .unwrap_or(default)
                    .parse()
                    .map_err(|_| format!("{key}: not a number"))
            };
            Ok(Validator::Jwks(JwksValidator {
                disk: disk.clone(),
                path: PathBuf::from(path),
                refresh_ms: number("sasl.oauthbearer.jwks.endpoint.refresh.ms", "3600000")?,
                audience: value("sasl.oauthbearer.expected.audience")
                    .unwrap_or("")
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
                issuer: value("sasl.oauthbearer.expected.issuer").map(String::from),
                sub_claim: value("sasl.oauthbearer.sub.claim.name")
                    .unwrap_or("sub")
                    .to_string(),
                scope_claim: value("sasl.oauthbearer.scope.claim.name")
                    .unwrap_or("scope")
                    .to_string(),
                clock_skew_seconds: number("sasl.oauthbearer.clock.skew.seconds", "30")?.max(0)
                    as u64,
                keys: Mutex::new(None),
            }))
        }
        Some(other) => Err(format!(
            "listener {listener}: sasl.server.callback.handler.class {other} is not one sluice has"
        )),
    }
}

/// The server side of one exchange.
pub enum Exchange {
    Plain,
    Scram(ScramServer),
    /// `error`: the JSON of a refused token, sent as a challenge; the client's `0x01` next
    /// ends the exchange with it.
    OAuth {
        error: Option<String>,
    },
    /// A re-authentication asked for another mechanism than the session's: the next token
    /// fails with this message, as Kafka's REAUTH_BAD_MECHANISM state does.
    BadMechanism(String),
}

/// What a client's token is answered with.
pub enum SaslStep {
    Challenge(Vec<u8>),
    Complete {
        response: Vec<u8>,
        /// The authenticated name (`User:<name>`).
        principal: String,
        /// When the credential expires (an OAUTHBEARER token's `exp`), in ms since the epoch.
        expires_ms: Option<i64>,
    },
}

/// Why an exchange failed.
pub enum SaslFailure {
    /// Sent to the client as the error message (Kafka's SaslAuthenticationException).
    Explicit(String),
    /// Kafka's generic "invalid credentials" message, which reveals nothing more.
    Credentials,
}

/// What an exchange reads: the listener's settings, the SCRAM store, the secret that makes
/// unknown users' salts, and the time.
pub struct ExchangeContext<'a> {
    pub listener: &'a ListenerSasl,
    pub scram: &'a ScramStore,
    pub secret: &'a [u8],
    pub now_ms: i64,
}

impl Exchange {
    pub fn evaluate(
        &mut self,
        cx: &ExchangeContext<'_>,
        token: &[u8],
    ) -> Result<SaslStep, SaslFailure> {
        match self {
            Exchange::Plain => plain(cx.listener, token),
            Exchange::BadMechanism(message) => Err(SaslFailure::Explicit(message.clone())),
            Exchange::Scram(server) => {
                let mechanism = server_mechanism(server);
                let lookup = |user: &str| cx.scram.get(user, mechanism);
                match server.evaluate(token, &lookup, cx.secret) {
                    Ok(ScramStep::Challenge(c)) => Ok(SaslStep::Challenge(c)),
                    Ok(ScramStep::Complete { response, username }) => Ok(SaslStep::Complete {
                        response,
                        principal: username,
                        expires_ms: None,
                    }),
                    Err(ScramFailure::AuthorizationId) => Err(SaslFailure::Explicit(
                        "Authentication failed: Client requested an authorization id that is different from username".into(),
                    )),
                    Err(ScramFailure::Credentials) => Err(SaslFailure::Credentials),
                }
            }
            Exchange::OAuth { error } => {
                if token == [1] {
                    if let Some(json) = error.take() {
                        return Err(SaslFailure::Explicit(json));
                    }
                }
                *error = None;
                let response = parse_initial_response(token).ok_or(SaslFailure::Credentials)?;
                let validator = cx.listener.oauth.as_ref().ok_or(SaslFailure::Credentials)?;
                match validator.validate(&response.token, cx.now_ms) {
                    Err(refusal) => {
                        tracing::debug!("OAUTHBEARER token refused: {}", refusal.reason);
                        let json = refusal.json();
                        *error = Some(json.clone());
                        Ok(SaslStep::Challenge(json.into_bytes()))
                    }
                    Ok(valid) => {
                        if !response.authzid.is_empty() && response.authzid != valid.principal {
                            return Err(SaslFailure::Explicit(format!(
                                "Authentication failed: Client requested an authorization id ({}) that is different from the token's principal name ({})",
                                response.authzid, valid.principal
                            )));
                        }
                        Ok(SaslStep::Complete {
                            response: Vec::new(),
                            principal: valid.principal,
                            expires_ms: Some(valid.expires_ms),
                        })
                    }
                }
            }
        }
    }
}

fn server_mechanism(server: &ScramServer) -> ScramMechanism {
    server.mechanism()
}

/// RFC 4616: `[authzid] NUL authcid NUL passwd`, checked as Kafka's `PlainSaslServer`.
fn plain(listener: &ListenerSasl, token: &[u8]) -> Result<SaslStep, SaslFailure> {
    let text = String::from_utf8_lossy(token);
    let parts: Vec<&str> = text.split('\u{0}').collect();
    if parts.len() != 3 {
        return Err(SaslFailure::Explicit(format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            parts.len()
        )));
    }
    let (authzid, username, password) = (parts[0], parts[1], parts[2]);
    if username.is_empty() {
        return Err(SaslFailure::Explicit(
            "Authentication failed: username not specified".into(),
        ));
    }
    if password.is_empty() {
        return Err(SaslFailure::Explicit(
            "Authentication failed: password not specified".into(),
        ));
    }
    let matches = listener.plain_users.get(username).is_some_and(|expected| {
        super::equal_in_constant_time(expected.as_bytes(), password.as_bytes())
    });
    if !matches {
        return Err(SaslFailure::Explicit(
            "Authentication failed: Invalid username or password".into(),
        ));
    }
    if !authzid.is_empty() && authzid != username {
        return Err(SaslFailure::Explicit(
            "Authentication failed: Client requested an authorization id that is different from username".into(),
        ));
    }
    Ok(SaslStep::Complete {
        response: Vec::new(),
        principal: username.to_string(),
        expires_ms: None,
    })
}
