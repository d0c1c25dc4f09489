//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's `ScramSaslServer` runs
//! them, and the credentials as Kafka stores them (`ScramFormatter`): a salt, an iteration
//! count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
//! HMAC(SaltedPassword, "Server Key"), where SaltedPassword = PBKDF2(HMAC-H, password, salt,
//! iterations). No password is kept.
//!
//! The exchange: client-first `n,[a=<authzid>],n=<name>,r=<client nonce>[,extensions]`;
//! server-first `r=<client nonce><server nonce>,s=<salt>,i=<iterations>`; client-final
//! `c=<binding>,r=<nonce>,p=<proof>`; server-final `v=<server signature>`.
//!
//! Every failure is the same credential failure to the client. Kafka fails an unknown user at
//! the first message and a wrong password at the second, which tells a client which users
//! exist; sluice answers an unknown user with a made-up salt (derived from the name and a
//! secret chosen at start-up, so it is the same each time) and fails it at the second message,
//! like a wrong password, as RFC 5802 recommends.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ring::{digest, hmac, pbkdf2, rand::SecureRandom};

/// The two mechanisms, with Kafka's ids (AlterUserScramCredentials' `mechanism`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub fn from_id(id: i8) -> Option<ScramMechanism> {
        match id {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    pub fn id(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        match name {
            "SCRAM-SHA-256" => Some(ScramMechanism::Sha256),
            "SCRAM-SHA-512" => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// Kafka's bounds on a credential's iterations.
    pub const MIN_ITERATIONS: i32 = 4096;
    pub const MAX_ITERATIONS: i32 = 16384;

    fn hmac(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    fn output_len(self) -> usize {
        self.digest().output_len()
    }
}

/// A stored credential.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

fn hmac_of(mechanism: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    let key = hmac::Key::new(mechanism.hmac(), key);
    hmac::sign(&key, data).as_ref().to_vec()
}

impl ScramCredential {
    /// The credential of a salted password (what AlterUserScramCredentials carries).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: Vec<u8>,
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let client_key = hmac_of(mechanism, salted_password, b"Client Key");
        let stored_key = digest::digest(mechanism.digest(), &client_key)
            .as_ref()
            .to_vec();
        let server_key = hmac_of(mechanism, salted_password, b"Server Key");
        ScramCredential {
            salt,
            stored_key,
            server_key,
            iterations,
        }
    }

    /// The credential of a password (tests and clients compute SaltedPassword this way).
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: Vec<u8>,
        iterations: i32,
    ) -> ScramCredential {
        let salted = salted_password(mechanism, password, &salt, iterations);
        ScramCredential::from_salted_password(mechanism, salt, &salted, iterations)
    }
}

/// PBKDF2(HMAC-H, password, salt, iterations).
pub fn salted_password(
    mechanism: ScramMechanism,
    password: &str,
    salt: &[u8],
    iterations: i32,
) -> Vec<u8> {
    let mut out = vec![0u8; mechanism.output_len()];
    let rounds =
        std::num::NonZeroU32::new(iterations.max(1) as u32).unwrap_or(std::num::NonZeroU32::MIN);
    pbkdf2::derive(
        mechanism.pbkdf2(),
        rounds,
        salt,
        password.as_bytes(),
        &mut out,
    );
    out
}

/// Why an exchange failed: the client is told only that its credentials were refused, except
/// for the one case Kafka names (an authorization id that is not the user).
#[derive(Debug, PartialEq)]
pub enum ScramFailure {
    Credentials,
    AuthorizationId,
}

/// The server side of one SCRAM exchange.
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
}

enum State {
    First,
    Final {
        username: String,
        credential: ScramCredential,
        /// Made up for a user without credentials: the exchange goes on and fails at the end.
        unknown_user: bool,
        client_first_bare: String,
        server_first: String,
        nonce: String,
    },
    Done,
}

/// What the server answers a client message with.
pub enum ScramStep {
    Challenge(Vec<u8>),
    /// The exchange succeeded for `username`; `response` is the server-final message.
    Complete {
        response: Vec<u8>,
        username: String,
    },
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism) -> ScramServer {
        ScramServer {
            mechanism,
            state: State::First,
        }
    }

    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Handles one client message. `lookup` finds a user's credential; `secret` makes up the
    /// salt of an unknown user.
    pub fn evaluate(
        &mut self,
        message: &[u8],
        lookup: &dyn Fn(&str) -> Option<ScramCredential>,
        secret: &[u8],
    ) -> Result<ScramStep, ScramFailure> {
        let text = std::str::from_utf8(message).map_err(|_| ScramFailure::Credentials)?;
        match std::mem::replace(&mut self.state, State::Done) {
            State::First => self.first(text, lookup, secret),
            State::Final {
                username,
                credential,
                unknown_user,
                client_first_bare,
                server_first,
                nonce,
            } => {
                let auth = FinalCheck {
                    credential: &credential,
                    client_first_bare: &client_first_bare,
                    server_first: &server_first,
                    nonce: &nonce,
                };
                let response = auth.verify(self.mechanism, text)?;
                if unknown_user {
                    return Err(ScramFailure::Credentials);
                }
                Ok(ScramStep::Complete { response, username })
            }
            State::Done => Err(ScramFailure::Credentials),
        }
    }

    fn first(
        &mut self,
        text: &str,
        lookup: &dyn Fn(&str) -> Option<ScramCredential>,
        secret: &[u8],
    ) -> Result<ScramStep, ScramFailure> {
        let first = parse_client_first(text).ok_or(ScramFailure::Credentials)?;
        let username = first.name.replace("=2C", ",").replace("=3D", "=");
        // Delegation tokens (`tokenauth=true`) are not supported.
        if first
            .extensions
            .iter()
            .any(|(k, v)| k == "tokenauth" && v.eq_ignore_ascii_case("true"))
        {
            return Err(ScramFailure::Credentials);
        }
        let known = lookup(&username);
        if known.is_some() && !first.authzid.is_empty() && first.authzid != username {
            return Err(ScramFailure::AuthorizationId);
        }
        let unknown_user = known.is_none();
        let credential = match known {
            Some(c) if c.iterations >= ScramMechanism::MIN_ITERATIONS => c,
            Some(_) => return Err(ScramFailure::Credentials),
            None => made_up_credential(self.mechanism, &username, secret),
        };
        let nonce = format!("{}{}", first.nonce, server_nonce());
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credential.salt),
            credential.iterations
        );
        let challenge = server_first.clone().into_bytes();
        self.state = State::Final {
            username,
            credential,
            unknown_user,
            client_first_bare: first.bare.to_string(),
            server_first,
            nonce,
        };
        Ok(ScramStep::Challenge(challenge))
    }
}

struct FinalCheck<'a> {
    credential: &'a ScramCredential,
    client_first_bare: &'a str,
    server_first: &'a str,
    nonce: &'a str,
}

impl FinalCheck<'_> {
    /// Checks the client-final message's nonce and proof; returns the server-final message.
    fn verify(&self, mechanism: ScramMechanism, text: &str) -> Result<Vec<u8>, ScramFailure> {
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or(ScramFailure::Credentials)?;
        let mut fields = without_proof.split(',');
        let binding = fields.next().and_then(|f| f.strip_prefix("c="));
        let nonce = fields.next().and_then(|f| f.strip_prefix("r="));
        if binding.is_none() || nonce != Some(self.nonce) {
            return Err(ScramFailure::Credentials);
        }
        let proof = BASE64
            .decode(proof)
            .map_err(|_| ScramFailure::Credentials)?;
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first_bare, self.server_first
        );
        let signature = hmac_of(
            mechanism,
            &self.credential.stored_key,
            auth_message.as_bytes(),
        );
        if proof.len() != signature.len() {
            return Err(ScramFailure::Credentials);
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        let stored_key = digest::digest(mechanism.digest(), &client_key);
        if !super::equal_in_constant_time(stored_key.as_ref(), &self.credential.stored_key) {
            return Err(ScramFailure::Credentials);
        }
        let server_signature = hmac_of(
            mechanism,
            &self.credential.server_key,
            auth_message.as_bytes(),
        );
        Ok(format!("v={}", BASE64.encode(server_signature)).into_bytes())
    }
}

struct ClientFirst<'a> {
    authzid: String,
    name: &'a str,
    nonce: &'a str,
    extensions: Vec<(String, String)>,
    bare: &'a str,
}

/// `n,[a=<authzid>],<bare>` with bare = `n=<name>,r=<nonce>[,k=v...]`; channel binding (`y`,
/// `p`) and mandatory extensions (`m=`) are refused, as Kafka refuses them.
fn parse_client_first(text: &str) -> Option<ClientFirst<'_>> {
    let rest = text.strip_prefix("n,")?;
    let (authz, bare) = rest.split_once(',')?;
    let authzid = match authz {
        "" => String::new(),
        a => a
            .strip_prefix("a=")?
            .replace("=2C", ",")
            .replace("=3D", "="),
    };
    let mut fields = bare.split(',');
    let name = fields.next()?.strip_prefix("n=")?;
    let nonce = fields.next()?.strip_prefix("r=")?;
    if name.is_empty() || nonce.is_empty() {
        return None;
    }
    let mut extensions = Vec::new();
    for field in fields {
        let (k, v) = field.split_once('=')?;
        if k == "m" {
            return None;
        }
        extensions.push((k.to_string(), v.to_string()));
    }
    Some(ClientFirst {
        authzid,
        name,
        nonce,
        extensions,
        bare,
    })
}

/// A server nonce of printable characters, as Kafka's (`[0-9a-z]`).
fn server_nonce() -> String {
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut bytes = [0u8; 26];
    // The system's random source failing is not something a client causes; fall back to
    // the clock, which keeps nonces unique if not secret.
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes[..16].copy_from_slice(&nanos.to_le_bytes());
    }
    bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect()
}

/// The same salt and iterations for an unknown name every time, so that the answer does not
/// tell it from a real user's.
fn made_up_credential(mechanism: ScramMechanism, username: &str, secret: &[u8]) -> ScramCredential {
    let salt = hmac_of(mechanism, secret, username.as_bytes());
    ScramCredential {
        salt: salt[..salt.len().min(16)].to_vec(),
        stored_key: vec![0; mechanism.output_len()],
        server_key: vec![0; mechanism.output_len()],
        iterations: 4096,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example, with the server nonce the RFC shows.
    #[test]
    fn rfc7677_keys_and_proof() {
        let m = ScramMechanism::Sha256;
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let cred = ScramCredential::from_password(m, "pencil", salt, 4096);
        let check = FinalCheck {
            credential: &cred,
            client_first_bare: "n=user,r=rOprNGfwEbeRWgbNEkqO",
            server_first: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        };
        let response = check
            .verify(m, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        assert_eq!(response, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        assert!(check
            .verify(m, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .is_err());
    }

    #[test]
    fn unknown_users_fail_at_the_end_like_wrong_passwords() {
        let mut server = ScramServer::new(ScramMechanism::Sha512);
        let none = |_: &str| None;
        let step = server
            .evaluate(b"n,,n=ghost,r=abc", &none, b"secret")
            .unwrap();
        assert!(matches!(step, ScramStep::Challenge(_)));
        let ScramStep::Challenge(first) = step else {
            unreachable!()
        };
        let again = ScramServer::new(ScramMechanism::Sha512).evaluate(
            b"n,,n=ghost,r=abc",
            &none,
            b"secret",
        );
        let Ok(ScramStep::Challenge(second)) = again else {
            panic!()
        };
        let salt = |m: &[u8]| {
            String::from_utf8_lossy(m)
                .split(",s=")
                .nth(1)
                .unwrap()
                .to_string()
        };
        assert_eq!(salt(&first), salt(&second), "the made-up salt is stable");
        let nonce = String::from_utf8_lossy(&first).split(',').next().unwrap()[2..].to_string();
        let last = format!("c=biws,r={nonce},p={}", BASE64.encode([0u8; 64]));
        assert_eq!(
            server.evaluate(last.as_bytes(), &none, b"secret").err(),
            Some(ScramFailure::Credentials)
        );
    }
}
