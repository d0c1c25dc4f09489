//! Who a connection is and what it may do, as Kafka decides it: principals (`User:<name>`),
//! TLS settings and certificate principals (`tls`, `principal_mapping`), the SASL mechanisms
//! (`sasl`: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) with their credential stores, and the
//! StandardAuthorizer's ACLs (`acl`, `authorizer`, with the `sluice-acls` file).
//!
//! It decides, it does not answer: mechanisms and the authorizer return typed outcomes, and
//! `api` turns them into Kafka's error codes. It reads key stores and writes its two files
//! (SCRAM credentials, ACLs) through `disk`, and never touches sockets: `network` hands it the
//! bytes of certificates and tokens.

/// Whether two secrets are equal, in time that depends only on their lengths.
pub fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A Kafka principal: a type (`User` for every built-in authentication) and a name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal {
    pub principal_type: String,
    pub name: String,
}

impl Principal {
    /// `User:ANONYMOUS`, the principal of PLAINTEXT connections and of TLS ones without a
    /// client certificate.
    pub fn anonymous() -> Principal {
        Principal::user("ANONYMOUS")
    }

    pub fn user(name: &str) -> Principal {
        Principal {
            principal_type: "User".to_string(),
            name: name.to_string(),
        }
    }

    /// Parses `Type:name` as ACLs and `super.users` write principals; None without a colon.
    pub fn parse(text: &str) -> Option<Principal> {
        let (principal_type, name) = text.split_once(':')?;
        Some(Principal {
            principal_type: principal_type.to_string(),
            name: name.to_string(),
        })
    }

    pub fn is_anonymous(&self) -> bool {
        self.principal_type == "User" && self.name == "ANONYMOUS"
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

pub mod acl;
pub mod authorizer;
mod jaas;
pub mod oauthbearer;
pub mod principal_mapping;
pub mod sasl;
pub mod scram;
pub mod scram_store;
pub mod tls;
mod tls_stores;

use std::sync::Arc;

use crate::config::Config;
use crate::disk::Disk;
use sasl::ListenerSasl;
use scram_store::ScramStore;
use tls::TlsServer;

/// One listener's security: TLS settings on SSL and SASL_SSL, mechanisms on the SASL ones.
pub struct ListenerSecurity {
    pub tls: Option<Arc<TlsServer>>,
    pub sasl: Option<ListenerSasl>,
}

/// Everything the broker knows about security, built once at start-up.
pub struct Security {
    /// By listener index (`Config::listeners`).
    pub listeners: Vec<ListenerSecurity>,
    pub scram: ScramStore,
    /// The ACLs and their decision, when `authorizer.class.name` is set.
    pub authorizer: Option<authorizer::Authorizer>,
    /// `sasl.server.max.receive.size`: the largest frame before authentication.
    pub sasl_max_receive_bytes: usize,
    /// `connection.failed.authentication.delay.ms`.
    pub failed_authentication_delay_ms: u64,
    /// Chosen at start-up: the made-up SCRAM salts of unknown users derive from it.
    pub secret: [u8; 32],
}

impl Security {
    /// Reads every listener's settings, the stores in the log directory; an error names the
    /// setting at fault.
    pub fn open(config: &Arc<Config>, disk: &Disk) -> anyhow::Result<Security> {
        let mut listeners = Vec::new();
        for listener in &config.listeners {
            let tls = if listener.protocol.uses_tls() {
                let server = TlsServer::load(config.clone(), listener, disk.clone())
                    .map_err(|e| anyhow::anyhow!("listener {}: {e}", listener.name))?;
                Some(Arc::new(server))
            } else {
                None
            };
            let sasl = if listener.protocol.uses_sasl() {
                Some(ListenerSasl::load(config, listener, disk).map_err(anyhow::Error::msg)?)
            } else {
                None
            };
            listeners.push(ListenerSecurity { tls, sasl });
        }
        let number = |key: &str, default: u64| -> anyhow::Result<u64> {
            match config.properties.get(key) {
                None => Ok(default),
                Some(v) => v
                    .parse()
                    .map_err(|_| anyhow::anyhow!("{key}: cannot parse '{v}'")),
            }
        };
        let mut secret = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret)
            .map_err(|_| anyhow::anyhow!("no system randomness for the SCRAM secret"))?;
        Ok(Security {
            listeners,
            scram: ScramStore::open(disk, &config.log_dir)?,
            authorizer: authorizer::Authorizer::open(config, disk)?,
            sasl_max_receive_bytes: number("sasl.server.max.receive.size", 524_288)? as usize,
            failed_authentication_delay_ms: number(
                "connection.failed.authentication.delay.ms",
                100,
            )?,
            secret,
        })
    }

    /// Reloads every TLS listener's stores whose files changed.
    pub fn reload_tls(&self) {
        for listener in &self.listeners {
            if let Some(tls) = &listener.tls {
                tls.reload_if_changed();
            }
        }
    }
}
