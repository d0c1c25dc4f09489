//! SaslHandshake (17, v0-1) and SaslAuthenticate (36, v0-2): a SASL connection's state
//! machine, as Kafka's `SaslServerAuthenticator` runs it.
//!
//! Before authentication only ApiVersions (once, first) and SaslHandshake are answered; any
//! other request closes the connection. An unknown mechanism is answered
//! UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection closes. After a v1
//! handshake the tokens travel in SaslAuthenticate requests; after a v0 handshake as raw
//! frames (`i32` length and the token, no header), answered the same way (`raw_token`). A
//! failed exchange is answered SASL_AUTHENTICATION_FAILED (the mechanism's own message, or
//! Kafka's generic one that reveals nothing) and the connection closes after
//! `connection.failed.authentication.delay.ms`; over raw tokens it just closes.
//!
//! Re-authentication (KIP-368): a session gets a lifetime when `connections.max.reauth.ms`
//! is set or its credential expires (OAUTHBEARER), reported in SaslAuthenticate v1+'s
//! `session_lifetime_ms`. A SaslHandshake on an authenticated connection with a lifetime (at
//! most one a second) starts a re-authentication, which must use the same mechanism and end
//! with the same principal. A request on an expired session closes the connection. Other
//! requests in the middle of an exchange close it too (Kafka answers them ILLEGAL_SASL_STATE
//! before closing; sluice closes without the response).
//!
//! On an authenticated connection, or one of a listener without SASL, SaslHandshake and
//! SaslAuthenticate are answered ILLEGAL_SASL_STATE by `after_authentication`.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, RequestKind, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;
use super::{respond, Broker, Outcome, Session};
use crate::protocol::DecodedRequest;
use crate::security::sasl::{Exchange, ExchangeContext, SaslFailure, SaslStep};
use crate::security::Principal;

/// Where one connection's SASL exchange stands.
#[derive(Default)]
pub struct SaslSession {
    state: State,
    /// The mechanism of the last successful authentication.
    mechanism: Option<String>,
    /// When the session expires (ms on the broker's clock), if it does.
    expires_at_ms: Option<i64>,
    last_reauth_start_ms: Option<i64>,
    /// The principal before a re-authentication started, which it must keep.
    reauthenticating: Option<Principal>,
}

#[derive(Default)]
enum State {
    /// ApiVersions or SaslHandshake may come.
    #[default]
    HandshakeOrVersions,
    /// ApiVersions came; SaslHandshake must.
    Handshake,
    /// Tokens of `mechanism`'s exchange; `raw` after a v0 handshake.
    Authenticate {
        mechanism: String,
        exchange: Box<Exchange>,
        raw: bool,
    },
    Complete,
}

impl SaslSession {
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete)
    }

    /// Whether the next frame is a raw token (after a v0 handshake).
    pub fn expects_raw_token(&self) -> bool {
        matches!(self.state, State::Authenticate { raw: true, .. })
    }

    fn expired(&self, now_ms: i64) -> bool {
        self.expires_at_ms.is_some_and(|at| now_ms > at)
    }
}

/// Runs a SASL connection's state machine on a request; None lets the request through.
pub fn gate(
    broker: &Broker,
    session: &mut Session,
    request: &mut DecodedRequest,
) -> Option<Outcome> {
    let now_ms = broker.clock.now_ms();
    let sasl = session.sasl.as_mut()?;
    match &sasl.state {
        State::Complete => {
            if request.api_key == ApiKey::SaslHandshake {
                let may_reauth = sasl.expires_at_ms.is_some()
                    && sasl.last_reauth_start_ms.is_none_or(|t| now_ms - t >= 1000);
                if may_reauth {
                    sasl.last_reauth_start_ms = Some(now_ms);
                    sasl.reauthenticating = Some(session.principal.clone());
                    return Some(handshake(broker, session, request));
                }
            }
            if sasl.expired(now_ms) {
                return Some(Outcome::Close("authentication session expired".into()));
            }
            None
        }
        State::HandshakeOrVersions if request.api_key == ApiKey::ApiVersions => {
            sasl.state = State::Handshake;
            None
        }
        State::HandshakeOrVersions | State::Handshake => match request.api_key {
            ApiKey::SaslHandshake => Some(handshake(broker, session, request)),
            other => Some(Outcome::Close(format!(
                "unexpected Kafka request of type {other:?} during SASL handshake"
            ))),
        },
        State::Authenticate { raw: false, .. } => match &request.body {
            RequestKind::SaslAuthenticate(r) => {
                let token = r.auth_bytes.clone();
                Some(authenticate(broker, session, request, token))
            }
            _ => Some(Outcome::Close(format!(
                "unexpected Kafka request of type {:?} during SASL authentication",
                request.api_key
            ))),
        },
        State::Authenticate { raw: true, .. } => {
            Some(Outcome::Close("expected a SASL token".into()))
        }
    }
}

fn listener_sasl<'a>(
    broker: &'a Broker,
    session: &Session,
) -> Option<&'a crate::security::sasl::ListenerSasl> {
    broker
        .security
        .listeners
        .get(session.listener)?
        .sasl
        .as_ref()
}

fn handshake(broker: &Broker, session: &mut Session, request: &DecodedRequest) -> Outcome {
    let RequestKind::SaslHandshake(SaslHandshakeRequest { mechanism, .. }) = &request.body else {
        return Outcome::Close("not a SaslHandshake".into());
    };
    let version = request.header.request_api_version;
    let correlation_id = request.header.correlation_id;
    let Some(listener) = listener_sasl(broker, session) else {
        return Outcome::Close("no SASL on this listener".into());
    };
    let mechanisms: Vec<StrBytes> = listener
        .enabled
        .iter()
        .map(|m| StrBytes::from_string(m.clone()))
        .collect();
    let mechanism = mechanism.to_string();
    let Some(exchange) = listener.start(&mechanism) else {
        let response = SaslHandshakeResponse::default()
            .with_error_code(code(ResponseError::UnsupportedSaslMechanism))
            .with_mechanisms(mechanisms);
        return fail(
            broker,
            respond(correlation_id, version, &response),
            "unsupported SASL mechanism",
        );
    };
    let Some(sasl) = session.sasl.as_mut() else {
        return Outcome::Close("no SASL session".into());
    };
    let exchange = match (&sasl.reauthenticating, &sasl.mechanism) {
        (Some(_), Some(previous)) if *previous != mechanism => Exchange::BadMechanism(format!(
            "SASL mechanism '{mechanism}' requested by client is not supported for re-authentication of mechanism '{previous}'"
        )),
        _ => exchange,
    };
    sasl.state = State::Authenticate {
        mechanism,
        exchange: Box::new(exchange),
        raw: version == 0,
    };
    respond(
        correlation_id,
        version,
        &SaslHandshakeResponse::default().with_mechanisms(mechanisms),
    )
}

/// The result of one token.
enum TokenResult {
    Continue(Vec<u8>),
    Done { response: Vec<u8>, lifetime_ms: i64 },
    Failed(String),
}

fn evaluate(broker: &Broker, session: &mut Session, token: &[u8]) -> TokenResult {
    let now_ms = broker.clock.now_ms();
    let Some(listener) = listener_sasl(broker, session) else {
        return TokenResult::Failed("no SASL on this listener".into());
    };
    let Some(sasl) = session.sasl.as_mut() else {
        return TokenResult::Failed("no SASL session".into());
    };
    let State::Authenticate {
        mechanism,
        exchange,
        ..
    } = &mut sasl.state
    else {
        return TokenResult::Failed("unexpected SASL token".into());
    };
    let cx = ExchangeContext {
        listener,
        scram: &broker.security.scram,
        secret: &broker.security.secret,
        now_ms,
    };
    let generic = |mechanism: &str| {
        let during = if sasl_reauth(&sasl.reauthenticating) {
            "re-authentication"
        } else {
            "authentication"
        };
        format!("Authentication failed during {during} due to invalid credentials with SASL mechanism {mechanism}")
    };
    match exchange.evaluate(&cx, token) {
        Ok(SaslStep::Challenge(c)) => TokenResult::Continue(c),
        Err(SaslFailure::Explicit(message)) => TokenResult::Failed(message),
        Err(SaslFailure::Credentials) => TokenResult::Failed(generic(mechanism)),
        Ok(SaslStep::Complete {
            response,
            principal,
            expires_ms,
        }) => {
            let principal = Principal::user(&principal);
            if let Some(previous) = sasl.reauthenticating.take() {
                if previous != principal {
                    return TokenResult::Failed(format!(
                        "Cannot change principals during re-authentication from {}.{}: {}.{}",
                        previous.principal_type,
                        previous.name,
                        principal.principal_type,
                        principal.name
                    ));
                }
            }
            let max_reauth_ms = listener.reauth_ms(mechanism);
            let lifetime_ms = match (expires_ms, max_reauth_ms > 0) {
                (None, false) => None,
                (None, true) => Some(max_reauth_ms),
                (Some(expiry), false) => Some((expiry - now_ms).max(0)),
                (Some(expiry), true) => Some((expiry - now_ms).min(max_reauth_ms).max(0)),
            };
            sasl.expires_at_ms = lifetime_ms.map(|l| now_ms + l);
            sasl.mechanism = Some(mechanism.clone());
            sasl.state = State::Complete;
            session.principal = principal;
            TokenResult::Done {
                response,
                lifetime_ms: lifetime_ms.unwrap_or(0),
            }
        }
    }
}

fn sasl_reauth(previous: &Option<Principal>) -> bool {
    previous.is_some()
}

fn authenticate(
    broker: &Broker,
    session: &mut Session,
    request: &DecodedRequest,
    token: Bytes,
) -> Outcome {
    let version = request.header.request_api_version;
    let correlation_id = request.header.correlation_id;
    let response = match evaluate(broker, session, &token) {
        TokenResult::Continue(challenge) => {
            SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(challenge))
        }
        TokenResult::Done {
            response,
            lifetime_ms,
        } => SaslAuthenticateResponse::default()
            .with_auth_bytes(Bytes::from(response))
            .with_session_lifetime_ms(lifetime_ms),
        TokenResult::Failed(message) => {
            tracing::info!(peer = %session.peer, "SASL authentication failed: {message}");
            let response = SaslAuthenticateResponse::default()
                .with_error_code(code(ResponseError::SaslAuthenticationFailed))
                .with_error_message(Some(StrBytes::from_string(message)));
            return fail(
                broker,
                respond(correlation_id, version, &response),
                "SASL authentication failed",
            );
        }
    };
    respond(correlation_id, version, &response)
}

/// A raw token after a v0 handshake: answered with a raw token, or the connection closes.
pub fn raw_token(broker: &Broker, session: &mut Session, frame: Bytes) -> Outcome {
    let reply = |bytes: Vec<u8>| {
        let mut out = BytesMut::with_capacity(4 + bytes.len());
        out.put_i32(bytes.len() as i32);
        out.put_slice(&bytes);
        Outcome::Respond(out.freeze())
    };
    match evaluate(broker, session, &frame) {
        TokenResult::Continue(challenge) => reply(challenge),
        TokenResult::Done { response, .. } => reply(response),
        TokenResult::Failed(message) => {
            tracing::info!(peer = %session.peer, "SASL authentication failed: {message}");
            Outcome::Close("SASL authentication failed".into())
        }
    }
}

/// Sends a failure, then closes the connection after Kafka's delay.
fn fail(broker: &Broker, response: Outcome, reason: &str) -> Outcome {
    match response {
        Outcome::Respond(response) => Outcome::RespondAndClose {
            response,
            delay: Duration::from_millis(broker.security.failed_authentication_delay_ms),
            reason: reason.to_string(),
        },
        other => other,
    }
}

/// SaslHandshake on a connection that is authenticated or does not use SASL.
pub fn handshake_after_authentication(_: SaslHandshakeRequest) -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(code(ResponseError::IllegalSaslState))
}

/// SaslAuthenticate on a connection that is authenticated or does not use SASL.
pub fn authenticate_after_authentication(_: SaslAuthenticateRequest) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(code(ResponseError::IllegalSaslState))
        .with_error_message(Some(StrBytes::from_static_str(
            "SaslAuthenticate request received after successful authentication",
        )))
}
