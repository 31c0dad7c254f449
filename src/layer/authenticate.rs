//! The steps that decide whose delivery this is and whether it is authentic:
//! the endpoint (scope and signing secrets, from trusted configuration), the
//! signature over the raw bytes (and the provider's handshake), and the
//! event's key and type.

use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;

use super::answer::{Answer, Outcome};
use super::config::Config;
use super::rejection::RejectionKind;
use super::ResponseBody;
use crate::event::ScopedEvent;
use crate::key::{EventIdentity, KeyError};
use crate::scope::{Endpoint, ResolveErrorKind};
use crate::verify::fetch::FetchErrorKind;
use crate::verify::{Delivery, SigningSecret, VerifyError};

/// Bodies of this many bytes or more are verified on tokio's blocking pool:
/// an HMAC-SHA256 over 64 KiB takes about 50 µs, the budget above which
/// tokio's docs advise against blocking an async worker thread.
const OFFLOAD_VERIFY_BYTES: usize = 64 * 1024;

/// The verified delivery's head and its event, or the layer's answer (a
/// refusal, or the provider's handshake).
pub(crate) async fn authenticate<B>(
    config: &Arc<Config>,
    mut parts: Parts,
    body: &Bytes,
) -> Result<(Parts, ScopedEvent), Box<Answer<B>>> {
    let span = tracing::Span::current();
    // 3. Scope and secrets, from trusted configuration.
    let endpoint = endpoint(config, &parts).await?;
    span.record("scope", endpoint.scope.as_str());
    // 4. Signature over the raw bytes.
    let replay = config.is_operator_replay(&parts.headers);
    if let Some((name, _)) = &config.operator_replay {
        // The token is for the layer only: the handler never sees it.
        parts.headers.remove(name);
    }
    if replay {
        // Signature checked as always; only the timestamp's age is not.
        tracing::info!(outcome = "operator_replay", "operator replay: timestamp tolerance not applied");
    }
    let (mut parts, verified, identified) = verify(config, parts, body, &endpoint.secrets, replay).await?;
    match verified {
        Err(e) => return Err(config.refuse(RejectionKind::InvalidSignature, e.kind().as_str()).into()),
        Ok(Some(answer)) => {
            tracing::info!(outcome = "challenge", "endpoint verification handshake answered; nothing claimed");
            return Err(Box::new(Answer { outcome: Outcome::Handshake, response: answer.map(ResponseBody::bytes) }));
        }
        Ok(None) => {}
    }
    // 5. Event key and type.
    let identity = identified
        .unwrap_or_else(|| config.provider.identify(&parts, body))
        .map_err(|e| config.refuse(RejectionKind::InvalidEventKey, e.kind().as_str()))?;
    span.record("key", identity.key.as_str());
    if let Some(t) = &identity.event_type {
        span.record("event_type", t.as_str());
    }
    let event = ScopedEvent::new(config.provider.name(), endpoint.scope, identity.key).with_type(identity.event_type);
    // A header whose value alone authenticates (a shared token, Basic
    // credentials) is for the layer only: neither the handler nor the inbox
    // row gets it. The provider's, not only its verifier's: a preset whose
    // verifier is wrapped keeps them.
    for name in &config.credential_headers {
        parts.headers.remove(name);
    }
    Ok((parts, event))
}

/// The endpoint the delivery is addressed to, with a usable scope and key
/// material.
async fn endpoint<B>(config: &Config, parts: &Parts) -> Result<Endpoint, Box<Answer<B>>> {
    let endpoint = match config.resolver.resolve(parts).await {
        Ok(endpoint) => endpoint,
        Err(e) if e.kind() == ResolveErrorKind::NotFound => {
            return Err(config.refuse(RejectionKind::UnknownEndpoint, "unknown_endpoint").into())
        }
        Err(e) => {
            tracing::error!(error = %e, "scope resolver failed");
            return Err(config.refuse(RejectionKind::StoreUnavailable, "scope_resolver").into());
        }
    };
    if crate::key::validate(&endpoint.scope).is_err() {
        tracing::error!("scope resolver returned an unusable scope");
        return Err(config.refuse(RejectionKind::Misconfigured, "invalid_scope").into());
    }
    if let Err(e) = config.provider.verifier_ref().check_secrets(&endpoint.secrets) {
        tracing::error!(
            scope = endpoint.scope.as_str(),
            error = %e,
            "scope resolver returned key material that authenticates nothing; refused"
        );
        return Err(config.refuse(RejectionKind::Misconfigured, e.kind().as_str()).into());
    }
    Ok(endpoint)
}

type Verified = (Parts, Result<Option<http::Response<Bytes>>, VerifyError>, Option<Result<EventIdentity, KeyError>>);

/// Verifies the delivery; a large or costly one on the blocking pool, so
/// hashing it does not stall other requests, and then its key is read there
/// too (a 1 MiB JSON body takes milliseconds to parse).
async fn verify<B>(
    config: &Arc<Config>,
    parts: Parts,
    body: &Bytes,
    secrets: &[SigningSecret],
    replay: bool,
) -> Result<Verified, Box<Answer<B>>> {
    if let Some(prepare) = config.provider.verifier_ref().prepare(&parts, body) {
        if let Err(e) = prepare.await {
            let kind = match e.kind() {
                FetchErrorKind::NotAllowed => RejectionKind::InvalidSignature,
                _ => RejectionKind::KeyUnavailable,
            };
            return Err(config.refuse(kind, e.kind().as_str()).into());
        }
    }
    let costly = body.len() >= OFFLOAD_VERIFY_BYTES || config.provider.verifier_ref().costly(&parts);
    if !costly {
        let verified = check(config, &parts, body, secrets, replay);
        return Ok((parts, verified, None));
    }
    let (shared, body, secrets) = (Arc::clone(config), body.clone(), secrets.to_vec());
    let task = tokio::task::spawn_blocking(move || {
        let verified = check(&shared, &parts, &body, &secrets, replay);
        let identified = matches!(verified, Ok(None)).then(|| shared.provider.identify(&parts, &body));
        (parts, verified, identified)
    });
    task.await.map_err(|_| Box::new(config.refuse(RejectionKind::Misconfigured, "verifier_panicked")))
}

/// Verifies the delivery and answers the provider's handshake: `Ok(None)`
/// for an ordinary verified delivery, `Ok(Some(answer))` for a verified
/// handshake, `Err` when the signature does not verify.
fn check(
    config: &Config,
    parts: &Parts,
    body: &[u8],
    secrets: &[SigningSecret],
    operator_replay: bool,
) -> Result<Option<http::Response<Bytes>>, VerifyError> {
    let mut delivery = Delivery::new(parts, body, secrets, config.clock.now());
    if operator_replay {
        delivery = delivery.without_timestamp_check();
    }
    config.provider.verifier_ref().verify(&delivery)?;
    Ok(config.provider.challenge_ref().and_then(|c| c.respond(&delivery)))
}
