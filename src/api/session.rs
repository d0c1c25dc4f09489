//! One connection as the handlers see it: the listener it arrived on, the client's address,
//! the principal it authenticated as, and, on a SASL listener, where its SASL exchange stands.
//! The connection owns it and lends it to each request in turn, so requests of one connection
//! see each other's effect on it in order.

use std::net::SocketAddr;

use super::sasl::SaslSession;
use crate::quota::QuotaClient;
use crate::security::Principal;

pub struct Session {
    /// The index of the listener in `Config::listeners` (and `Broker::listeners`).
    pub listener: usize,
    pub peer: SocketAddr,
    /// `User:ANONYMOUS` until authenticated (or for good on PLAINTEXT, and on SSL without a
    /// client certificate).
    pub principal: Principal,
    /// The SASL exchange of a SASL_PLAINTEXT or SASL_SSL connection; None on the others.
    pub sasl: Option<SaslSession>,
}

impl Session {
    /// A connection on `listener` from `peer`, as `principal`; `sasl` when its listener
    /// authenticates with SASL.
    pub fn new(listener: usize, peer: SocketAddr, principal: Principal, sasl: bool) -> Session {
        Session {
            listener,
            peer,
            principal,
            sasl: sasl.then(SaslSession::default),
        }
    }

    /// Whether requests other than ApiVersions and the SASL exchange may be served.
    pub fn is_authenticated(&self) -> bool {
        self.sasl.as_ref().is_none_or(|s| s.is_complete())
    }

    /// The client's address as ACL host filters compare it: the IP's text form.
    pub fn host(&self) -> String {
        self.peer.ip().to_string()
    }

    /// Who a request is charged to for quotas: the principal's name and the client id.
    pub fn quota_client<'a>(&'a self, client_id: &'a str) -> QuotaClient<'a> {
        QuotaClient {
            user: &self.principal.name,
            client_id,
        }
    }
}
