//! The JWS and its `x5c` chain, checked offline as Apple's
//! `app-store-server-library` checks them with online checks off
//! (`SignedDataVerifier._decode_signed_object` and
//! `_ChainVerifier._verify_chain_without_caching` in the Python library,
//! `verifyCertificateChainWithoutCaching` in the Node one).

use base64::Engine as _;
use p256::ecdsa::signature::hazmat::PrehashVerifier as _;
use p256::ecdsa::signature::Verifier as _;
use sha2::Digest as _;
use x509_cert::der::{Decode as _, Encode as _, Reader as _};

use crate::verify::{VerifyError, VerifyErrorKind};

/// The extension Apple's leaf (signing) certificates carry,
/// 1.2.840.113635.100.6.11.1 (Apple's library refuses a leaf without it).
pub(super) const LEAF_MARKER: &str = "1.2.840.113635.100.6.11.1";
/// The extension Apple's intermediate (WWDR) certificates carry,
/// 1.2.840.113635.100.6.2.1.
pub(super) const INTERMEDIATE_MARKER: &str = "1.2.840.113635.100.6.2.1";

const ECDSA_WITH_SHA256: &str = "1.2.840.10045.4.3.2";
const ECDSA_WITH_SHA384: &str = "1.2.840.10045.4.3.3";
const BASIC_CONSTRAINTS: &str = "2.5.29.19";

/// A trusted root: its DER, parsed once.
#[derive(Debug, Clone)]
pub(super) struct Root(Cert);

impl Root {
    /// `der` as a trusted root, or `None` when it is not an X.509 certificate
    /// with a P-256 or P-384 key.
    pub(super) fn parse(der: &[u8]) -> Option<Self> {
        Cert::parse(der).map(Root)
    }
}

/// A certificate: what the chain check reads from it.
#[derive(Debug, Clone)]
struct Cert {
    cert: x509_cert::Certificate,
    /// The DER of its `tbsCertificate`, as signed.
    tbs: Vec<u8>,
    key: Key,
}

/// An ECDSA public key of the two curves Apple's chain uses.
#[derive(Debug, Clone)]
enum Key {
    P256(p256::ecdsa::VerifyingKey),
    P384(p384::ecdsa::VerifyingKey),
}

impl Cert {
    fn parse(der: &[u8]) -> Option<Self> {
        use p256::pkcs8::DecodePublicKey as _;
        let cert = x509_cert::Certificate::from_der(der).ok()?;
        // The signed bytes are the certificate's first element as it came,
        // not a re-encoding.
        let mut reader = x509_cert::der::SliceReader::new(der).ok()?;
        x509_cert::der::Header::decode(&mut reader).ok()?;
        let tbs = reader.tlv_bytes().ok()?.to_vec();
        let spki = cert.tbs_certificate().subject_public_key_info().to_der().ok()?;
        let key = match p256::ecdsa::VerifyingKey::from_public_key_der(&spki) {
            Ok(key) => Key::P256(key),
            Err(_) => Key::P384(p384::ecdsa::VerifyingKey::from_public_key_der(&spki).ok()?),
        };
        Some(Self { cert, tbs, key })
    }

    /// Whether `issuer` issued this certificate: its issuer name is the
    /// issuer's subject, and the issuer's key signed it (ECDSA with SHA-256
    /// or SHA-384).
    fn issued_by(&self, issuer: &Cert) -> bool {
        if self.cert.tbs_certificate().issuer() != issuer.cert.tbs_certificate().subject() {
            return false;
        }
        let Some(signature) = self.cert.signature().as_bytes() else { return false };
        let digest = match self.cert.signature_algorithm().oid.to_string().as_str() {
            ECDSA_WITH_SHA256 => sha2::Sha256::digest(&self.tbs).to_vec(),
            ECDSA_WITH_SHA384 => sha2::Sha384::digest(&self.tbs).to_vec(),
            _ => return false,
        };
        match &issuer.key {
            Key::P256(key) => {
                p256::ecdsa::Signature::from_der(signature).is_ok_and(|s| key.verify_prehash(&digest, &s).is_ok())
            }
            Key::P384(key) => {
                p384::ecdsa::Signature::from_der(signature).is_ok_and(|s| key.verify_prehash(&digest, &s).is_ok())
            }
        }
    }

    /// Whether it is valid at `at_ms` (Unix milliseconds), both ends
    /// included.
    fn valid_at(&self, at_ms: u64) -> bool {
        let validity = self.cert.tbs_certificate().validity();
        let ms = |t: x509_cert::time::Time| u64::try_from(t.to_unix_duration().as_millis()).unwrap_or(u64::MAX);
        ms(validity.not_before) <= at_ms && at_ms <= ms(validity.not_after)
    }

    /// Whether it carries the extension `oid` (dotted).
    fn has_extension(&self, oid: &str) -> bool {
        self.extension(oid).is_some()
    }

    fn extension(&self, oid: &str) -> Option<&x509_cert::ext::Extension> {
        let extensions = self.cert.tbs_certificate().extensions()?;
        extensions.iter().find(|e| e.extn_id.to_string() == oid)
    }

    /// Whether its basic constraints say it is a CA.
    fn is_ca(&self) -> bool {
        use x509_cert::ext::pkix::BasicConstraints;
        self.extension(BASIC_CONSTRAINTS)
            .and_then(|e| BasicConstraints::from_der(e.extn_value.as_bytes()).ok())
            .is_some_and(|b| b.ca)
    }
}

/// A compact JWS whose signature and chain verified: its payload, decoded.
#[derive(Debug)]
pub(super) struct Verified {
    pub(super) payload: serde_json::Value,
    /// The payload's `signedDate` (Unix milliseconds).
    pub(super) signed_ms: u64,
}

fn malformed() -> VerifyError {
    VerifyError::new(VerifyErrorKind::MalformedHeader)
}

fn refused(why: &str) -> VerifyError {
    tracing::debug!("apple-app-store: {why}; refused");
    VerifyError::new(VerifyErrorKind::NoMatchingSignature)
}

/// The three parts of a compact JWS: header, payload, signature (each
/// base64url without padding, as Apple writes them).
pub(super) fn parts(jws: &str) -> Result<[&str; 3], VerifyError> {
    let mut it = jws.split('.');
    match (it.next(), it.next(), it.next(), it.next()) {
        (Some(h), Some(p), Some(s), None) => Ok([h, p, s]),
        _ => Err(malformed()),
    }
}

/// A base64url part decoded (no padding; trailing bits must be zero).
pub(super) fn base64url(part: &str) -> Result<Vec<u8>, VerifyError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).map_err(|_| malformed())
}

/// Verifies the compact JWS `jws` as Apple's library does with online checks
/// off: `alg` ES256; `x5c` exactly three standard-base64 DER certificates;
/// the intermediate (the second) issued by one of `roots` and a CA, the leaf
/// (the first) issued by the intermediate; Apple's marker extensions on both;
/// the leaf, the intermediate and that root valid at the payload's
/// `signedDate`; the ES256 signature (raw `r || s`) over `header.payload` by
/// the leaf's P-256 key. The third certificate is not a trust anchor: like
/// Apple's libraries, the chain ends at a trusted root.
///
/// # Errors
/// [`VerifyErrorKind::MalformedHeader`] for a JWS, header or certificate that
/// does not parse, [`VerifyErrorKind::MissingField`] for a payload without
/// `signedDate`, [`VerifyErrorKind::NoMatchingSignature`] for anything the
/// chain or the signature refuses.
pub(super) fn verify(jws: &str, roots: &[Root]) -> Result<Verified, VerifyError> {
    let [h, p, s] = parts(jws)?;
    let header: serde_json::Value = serde_json::from_slice(&base64url(h)?).map_err(|_| malformed())?;
    if header.get("alg").and_then(serde_json::Value::as_str) != Some("ES256") {
        return Err(refused("the JWS's alg is not ES256"));
    }
    let x5c = header.get("x5c").and_then(serde_json::Value::as_array).ok_or_else(malformed)?;
    if x5c.len() != 3 {
        return Err(refused("the x5c chain does not hold exactly 3 certificates"));
    }
    let cert = |i: usize| -> Result<Cert, VerifyError> {
        let text = x5c[i].as_str().ok_or_else(malformed)?;
        let der = base64::engine::general_purpose::STANDARD.decode(text).map_err(|_| malformed())?;
        Cert::parse(&der).ok_or_else(malformed)
    };
    let (leaf, intermediate) = (cert(0)?, cert(1)?);
    let payload: serde_json::Value = serde_json::from_slice(&base64url(p)?).map_err(|_| malformed())?;
    let signed_ms = payload
        .get("signedDate")
        .and_then(serde_json::Value::as_u64)
        .ok_or(VerifyError::new(VerifyErrorKind::MissingField))?;
    let root = roots
        .iter()
        .find(|root| intermediate.issued_by(&root.0))
        .ok_or_else(|| refused("the intermediate is not issued by a trusted root"))?;
    if !intermediate.is_ca() || !leaf.issued_by(&intermediate) {
        return Err(refused("the leaf is not issued by the intermediate, or the intermediate is not a CA"));
    }
    if !leaf.has_extension(LEAF_MARKER) || !intermediate.has_extension(INTERMEDIATE_MARKER) {
        return Err(refused("a certificate lacks Apple's marker extension"));
    }
    if ![&leaf, &intermediate, &root.0].iter().all(|c| c.valid_at(signed_ms)) {
        return Err(refused("a certificate of the chain is not valid at signedDate"));
    }
    let Key::P256(key) = &leaf.key else { return Err(refused("the leaf's key is not P-256 (ES256)")) };
    let signature = p256::ecdsa::Signature::from_slice(&base64url(s)?).map_err(|_| malformed())?;
    let signed = &jws[..h.len() + 1 + p.len()];
    key.verify(signed.as_bytes(), &signature).map_err(|_| refused("the JWS signature does not verify"))?;
    Ok(Verified { payload, signed_ms })
}
