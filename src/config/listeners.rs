//! Listeners as Kafka configures them: `listeners` (`NAME://host:port,...`), the security
//! protocol of each name from `listener.security.protocol.map` (each protocol's own name maps
//! to itself by default), `advertised.listeners` by name, `controller.listener.names` (served
//! by a controller, so not by sluice), and `inter.broker.listener.name` /
//! `security.inter.broker.protocol` (accepted and checked; a single broker has no peers).
//!
//! Per-listener settings are Kafka's prefixed keys: `listener.name.<name>.<key>` overrides
//! `<key>` for that listener, and `listener.name.<name>.<mechanism>.<key>` overrides both for
//! one SASL mechanism (`Config::listener_value`, `Config::mechanism_value`), as Kafka's
//! `ChannelBuilders` merges them.

use std::collections::BTreeMap;
use std::fmt;

use super::{ConfigError, Endpoint};

/// How a listener's connections are secured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        Some(match name.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => SecurityProtocol::Plaintext,
            "SSL" => SecurityProtocol::Ssl,
            "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
            "SASL_SSL" => SecurityProtocol::SaslSsl,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One listener sluice serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// The listener name, upper case as Kafka's `ListenerName.normalised`.
    pub name: String,
    /// Where to bind: host (0.0.0.0 for an empty host) and port (0: any free port).
    pub bind: Endpoint,
    pub protocol: SecurityProtocol,
    /// What Metadata, FindCoordinator and DescribeCluster tell a client connected here.
    pub advertised: Endpoint,
}

impl Listener {
    /// `listener.name.<name>.`, the prefix of this listener's own settings.
    pub fn config_prefix(&self) -> String {
        format!("listener.name.{}.", self.name.to_ascii_lowercase())
    }
}

/// `NAME://host:port` items of a listeners value, names upper-cased.
pub fn parse_endpoints(key: &str, value: &str) -> Result<Vec<(String, Endpoint)>, ConfigError> {
    let mut out: Vec<(String, Endpoint)> = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, address) = item.split_once("://").ok_or_else(|| {
            ConfigError(format!("{key}: expected NAME://host:port, got '{item}'"))
        })?;
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| ConfigError(format!("{key}: missing port in '{item}'")))?;
        let port: u16 = super::parse(key, port)?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = name.to_ascii_uppercase();
        if out.iter().any(|(n, _)| *n == name) {
            return Err(ConfigError(format!(
                "{key}: each listener must have a different name, '{name}' is repeated"
            )));
        }
        out.push((
            name,
            Endpoint {
                host: host.to_string(),
                port,
            },
        ));
    }
    Ok(out)
}

/// Checks a listeners value's syntax (the row's check; `resolve` builds the listeners).
pub fn check_endpoints(key: &str, value: &str) -> Result<(), ConfigError> {
    parse_endpoints(key, value).map(drop)
}

/// `NAME:PROTOCOL,...`, names upper-cased.
fn protocol_map(value: Option<&str>) -> Result<BTreeMap<String, SecurityProtocol>, ConfigError> {
    let key = "listener.security.protocol.map";
    let mut map = BTreeMap::new();
    let Some(value) = value else {
        for p in [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ] {
            map.insert(p.name().to_string(), p);
        }
        return Ok(map);
    };
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, protocol) = item
            .split_once(':')
            .ok_or_else(|| ConfigError(format!("{key}: expected NAME:PROTOCOL, got '{item}'")))?;
        let protocol = SecurityProtocol::from_name(protocol.trim())
            .ok_or_else(|| ConfigError(format!("{key}: unknown security protocol '{protocol}'")))?;
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    Ok(map)
}

/// The listeners sluice serves, from the raw properties.
pub fn resolve(props: &BTreeMap<&str, &str>, default: &str) -> Result<Vec<Listener>, ConfigError> {
    let listeners = parse_endpoints("listeners", props.get("listeners").unwrap_or(&default))?;
    let advertised = match props.get("advertised.listeners") {
        Some(value) => parse_endpoints("advertised.listeners", value)?,
        None => Vec::new(),
    };
    let protocols = protocol_map(props.get("listener.security.protocol.map").copied())?;
    let controllers: Vec<String> = props
        .get("controller.listener.names")
        .map(|v| {
            v.split(',')
                .map(|s| s.trim().to_ascii_uppercase())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for (name, bind) in listeners {
        if controllers.contains(&name) {
            continue;
        }
        let protocol = *protocols.get(&name).ok_or_else(|| {
            ConfigError(format!(
                "listeners: no security protocol defined for listener {name} \
                 (listener.security.protocol.map)"
            ))
        })?;
        let host = if bind.host.is_empty() {
            "0.0.0.0".to_string()
        } else {
            bind.host.clone()
        };
        // A listener advertised under its name; otherwise its own address (a wildcard
        // address is advertised as loopback, where a client on this machine reaches it).
        let advertised = match advertised.iter().find(|(n, _)| *n == name) {
            Some((_, endpoint)) => endpoint.clone(),
            None => Endpoint {
                host: match host.as_str() {
                    "0.0.0.0" | "::" => "127.0.0.1".to_string(),
                    other => other.to_string(),
                },
                port: bind.port,
            },
        };
        out.push(Listener {
            name,
            bind: Endpoint {
                host,
                port: bind.port,
            },
            protocol,
            advertised,
        });
    }
    if out.is_empty() {
        return Err(ConfigError(
            "listeners: no listener left to serve besides controller.listener.names".into(),
        ));
    }
    if let Some((name, _)) = advertised
        .iter()
        .find(|(name, _)| !out.iter().any(|l| l.name == *name))
    {
        return Err(ConfigError(format!(
            "advertised.listeners: listener {name} is not in listeners"
        )));
    }
    check_inter_broker(props, &out)?;
    Ok(out)
}

/// Kafka's checks of the inter-broker listener: at most one of the two keys, naming a listener
/// (or a protocol one listener uses).
fn check_inter_broker(
    props: &BTreeMap<&str, &str>,
    listeners: &[Listener],
) -> Result<(), ConfigError> {
    let name = props.get("inter.broker.listener.name");
    let protocol = props.get("security.inter.broker.protocol");
    match (name, protocol) {
        (Some(_), Some(_)) => Err(ConfigError(
            "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."
                .into(),
        )),
        (Some(name), None) if !listeners.iter().any(|l| l.name.eq_ignore_ascii_case(name)) => {
            Err(ConfigError(format!(
                "inter.broker.listener.name: {name} must be a listener name in listeners"
            )))
        }
        (None, Some(p)) => match SecurityProtocol::from_name(p) {
            None => Err(ConfigError(format!(
                "security.inter.broker.protocol: unknown security protocol '{p}'"
            ))),
            Some(p) if !listeners.iter().any(|l| l.protocol == p) => Err(ConfigError(format!(
                "security.inter.broker.protocol: no listener uses {p}"
            ))),
            Some(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

/// `PLAINTEXT://host:port,...` for DescribeConfigs.
pub fn format_listeners(listeners: &[Listener], advertised: bool) -> String {
    listeners
        .iter()
        .map(|l| {
            let e = if advertised { &l.advertised } else { &l.bind };
            format!("{}://{e}", l.name)
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether `key` is a listener-prefixed form of a key the table knows:
/// `listener.name.<l>.<key>` or `listener.name.<l>.<mechanism>.<key>`.
pub fn prefixed_base_key(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("listener.name.")?;
    let (_, rest) = rest.split_once('.')?;
    Some(rest)
}
