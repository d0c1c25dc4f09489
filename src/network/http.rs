//! The HTTP endpoint (`sluice.http.listener`, off by default): `/health` (the process is up),
//! `/ready` (the log directory is loaded and the Kafka listeners accept), `/metrics` (the
//! Prometheus text format, docs/metrics.md) and, when `sluice.fault.injection.enable` is set,
//! the fault-injection API (`/faults`, `/requests`; docs/fault-injection.md). It listens on its
//! own address, never on a Kafka listener, and serves HTTP/1.1 with hyper.

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::api::faults::{rule_from_json, rule_to_json, served_to_json};
use crate::api::Broker;
use crate::metrics::{render, LogSize, Scrape};

/// The largest request body accepted (a fault rule is a few hundred bytes).
const MAX_BODY_BYTES: usize = 64 * 1024;

/// What the endpoint serves from: the broker, once its log directory is loaded.
#[derive(Default)]
pub struct HttpState {
    broker: OnceLock<Arc<Broker>>,
}

impl HttpState {
    /// Called once the logs are open and the Kafka listeners are bound: `/ready` answers 200.
    pub fn set_ready(&self, broker: Arc<Broker>) {
        let _ = self.broker.set(broker);
    }
}

/// Binds the HTTP listener (port 0: any free port).
pub async fn bind_http(host: &str, port: u16) -> std::io::Result<TcpListener> {
    TcpListener::bind((host, port)).await
}

/// Serves HTTP until shutdown.
pub async fn serve_http(
    listener: TcpListener,
    state: Arc<HttpState>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("http accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(route(&state, request).await) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!("http connection: {e}");
            }
        });
    }
}

type HttpResponse = Response<Full<Bytes>>;

async fn route(state: &HttpState, request: Request<Incoming>) -> HttpResponse {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let broker = state.broker.get();
    match (&method, path.as_str()) {
        (&Method::GET, "/health") => text(StatusCode::OK, "ok\n"),
        (&Method::GET, "/ready") => match broker {
            Some(b) if b.logs.is_offline() => {
                text(StatusCode::SERVICE_UNAVAILABLE, "log directory offline\n")
            }
            Some(_) => text(StatusCode::OK, "ready\n"),
            None => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "loading the log directory\n",
            ),
        },
        (&Method::GET, "/metrics") => match broker {
            Some(b) => metrics(b),
            None => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "loading the log directory\n",
            ),
        },
        (_, "/faults" | "/faults/connections" | "/requests") => match broker {
            Some(b) if b.faults.is_enabled() => faults(b, &method, &path, request).await,
            Some(_) => text(
                StatusCode::NOT_FOUND,
                "fault injection is off (sluice.fault.injection.enable=true turns it on)\n",
            ),
            None => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "loading the log directory\n",
            ),
        },
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: /health, /ready, /metrics\n",
        ),
    }
}

fn metrics(broker: &Broker) -> HttpResponse {
    let mut log_sizes = Vec::new();
    for topic in broker.logs.topics() {
        for partition in &topic.partitions {
            if let Ok(stats) = partition.log_stats() {
                log_sizes.push(LogSize {
                    topic: topic.name.clone(),
                    partition: partition.index,
                    size_bytes: stats.size_bytes,
                });
            }
        }
    }
    let scrape = Scrape {
        log_sizes,
        log_flush: broker.logs.disk().log_flush_time(),
    };
    let body = render(&broker.metrics, &scrape);
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/plain; version=0.0.4; charset=utf-8")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, "response\n"))
}

async fn faults(
    broker: &Broker,
    method: &Method,
    path: &str,
    request: Request<Incoming>,
) -> HttpResponse {
    let faults = &broker.faults;
    match (method, path) {
        (&Method::GET, "/faults") => {
            let rules: Vec<Value> = faults.rules().iter().map(rule_to_json).collect();
            let listing =
                json!({"rules": rules, "refuse_connections": faults.refuses_connections()});
            json_response(StatusCode::OK, &listing)
        }
        (&Method::POST, "/faults") => match read_json(request).await {
            Ok(body) => match rule_from_json(&body) {
                Ok(rule) => {
                    let shown = rule_to_json(&rule);
                    tracing::info!(rule = %shown, "fault injection: rule added");
                    faults.add(rule);
                    json_response(StatusCode::CREATED, &shown)
                }
                Err(e) => json_response(StatusCode::BAD_REQUEST, &json!({"error": e})),
            },
            Err(e) => json_response(StatusCode::BAD_REQUEST, &json!({"error": e})),
        },
        (&Method::DELETE, "/faults") => {
            faults.reset();
            tracing::info!("fault injection: reset");
            json_response(StatusCode::OK, &json!({"reset": true}))
        }
        (&Method::POST, "/faults/connections") => match read_json(request).await {
            Ok(body) => match body.get("refuse").and_then(Value::as_bool) {
                Some(refuse) => {
                    faults.set_refuse_connections(refuse);
                    json_response(StatusCode::OK, &json!({"refuse_connections": refuse}))
                }
                None => json_response(
                    StatusCode::BAD_REQUEST,
                    &json!({"error": "needs {\"refuse\": true|false}"}),
                ),
            },
            Err(e) => json_response(StatusCode::BAD_REQUEST, &json!({"error": e})),
        },
        (&Method::GET, "/requests") => {
            let served: Vec<Value> = faults.recent().iter().map(served_to_json).collect();
            json_response(StatusCode::OK, &Value::Array(served))
        }
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"),
    }
}

async fn read_json(request: Request<Incoming>) -> Result<Value, String> {
    let body = Limited::new(request.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|e| format!("reading the body: {e}"))?
        .to_bytes();
    serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))
}

fn json_response(status: StatusCode, value: &Value) -> HttpResponse {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(format!("{value}\n"))))
        .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, "response\n"))
}

fn text(status: StatusCode, body: &'static str) -> HttpResponse {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response
}
