//! Icons: which icon URLs a client may fetch or decode, and what their bytes must be.
//!
//! The client guide: "Allow only HTTPS or data: URIs for icons, and reject javascript:, file:,
//! ftp:, and similar. Fetch without credentials, reject redirects to a different origin, and
//! check that the origin is the same as the server's. Set limits on size and frame count. SVG
//! can contain executable content, so sanitize it or do not allow it. Verify the MIME type from
//! the leading bytes."
//!
//! [`NetPolicy::check_icon_url`] takes an icon's `src`:
//! - `https:` (or `http:` to loopback in development mode, like the server itself) on the
//!   **same origin** as the server's URL, and passing every [`NetPolicy::check_url`] rule, gives
//!   [`IconSource::Fetch`];
//! - `data:` with the media type `image/png`, `image/jpeg`, `image/gif` or `image/webp`
//!   (`image/svg+xml` only with [`NetPolicy::allow_svg_icons`]), whose decoded bytes are at
//!   most [`MAX_ICON_BYTES`] and sniff ([`sniff_image`]) as the declared type, gives
//!   [`IconSource::Data`] with the bytes;
//! - anything else is refused, a relative `src` included (the schema asks for a URI).
//!
//! **The driver's duties for [`IconSource::Fetch`]**: fetch it with no credentials at all (no
//! `Authorization`, no cookies, none of the headers the user configured for the server), send
//! each redirect through [`NetPolicy::check_redirect`] with [`UrlPurpose::Icon`] (which refuses
//! a hop off the origin), read at most [`MAX_ICON_BYTES`] + 1 bytes, and pass the body to
//! [`NetPolicy::check_icon_bytes`], which judges the bytes, not the `Content-Type`. Frame count
//! and pixel dimensions are the image decoder's to limit: the host decodes with limits of its
//! own (a single frame is enough for an icon).

use std::fmt;

use data_url::DataUrl;
use url::Url;

use super::{same_origin, CheckedUrl, NetPolicy, RejectReason, Subject, UrlPurpose, UrlRejected};

/// The largest icon accepted, in bytes (decoded, for a `data:` icon; the body, for a fetched
/// one): 512 KiB, far above any icon a list of tools needs, small enough that a hostile server
/// cannot make the host hold much.
pub const MAX_ICON_BYTES: usize = 512 * 1024;

/// The longest icon URL looked at, in bytes: room for [`MAX_ICON_BYTES`] percent-encoded (three
/// bytes each) plus a header. A longer `src` is refused before it is parsed or decoded.
pub const MAX_ICON_URL_LEN: usize = 3 * MAX_ICON_BYTES + 256;

/// An image format an icon may be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ImageKind {
    /// PNG (`image/png`).
    Png,
    /// JPEG (`image/jpeg`).
    Jpeg,
    /// GIF (`image/gif`).
    Gif,
    /// WebP (`image/webp`).
    Webp,
    /// SVG (`image/svg+xml`): accepted only with [`NetPolicy::allow_svg_icons`].
    Svg,
}

impl ImageKind {
    /// The media type.
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
            Self::Gif => "image/gif",
            Self::Webp => "image/webp",
            Self::Svg => "image/svg+xml",
        }
    }

    /// The kind a media type's `type/subtype` (lowercase, no parameters) names, if allowed for
    /// icons at all.
    fn from_media_type(type_: &str, subtype: &str) -> Option<Self> {
        if type_ != "image" {
            return None;
        }
        Some(match subtype {
            "png" => Self::Png,
            "jpeg" => Self::Jpeg,
            "gif" => Self::Gif,
            "webp" => Self::Webp,
            "svg+xml" => Self::Svg,
            _ => return None,
        })
    }
}

impl fmt::Display for ImageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.media_type())
    }
}

/// How far into a text an SVG's root element is looked for.
const SVG_SNIFF_WINDOW: usize = 4096;

/// The image format `bytes` start with, from their magic numbers: PNG's signature, JPEG's
/// `FF D8 FF`, `GIF87a`/`GIF89a`, `RIFF....WEBP`; or SVG when the text (after a UTF-8 byte
/// order mark, whitespace, an XML declaration, comments and a doctype, within the first 4 KiB)
/// opens with an `<svg` element. `None` for anything else.
pub fn sniff_image(bytes: &[u8]) -> Option<ImageKind> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some(ImageKind::Png);
    }
    if bytes.starts_with(b"\xff\xd8\xff") {
        return Some(ImageKind::Jpeg);
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        return Some(ImageKind::Gif);
    }
    if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        return Some(ImageKind::Webp);
    }
    sniff_svg(bytes).then_some(ImageKind::Svg)
}

fn sniff_svg(bytes: &[u8]) -> bool {
    let window = bytes.get(..SVG_SNIFF_WINDOW).unwrap_or(bytes);
    let mut rest = window.strip_prefix(b"\xef\xbb\xbf").unwrap_or(window);
    loop {
        rest = rest.trim_ascii_start();
        let skip_past = |rest: &[u8], end: &[u8]| -> Option<usize> {
            rest.windows(end.len())
                .position(|w| w == end)
                .map(|at| at + end.len())
        };
        let skipped = if rest.starts_with(b"<?") {
            skip_past(rest, b"?>")
        } else if rest.starts_with(b"<!--") {
            skip_past(rest, b"-->")
        } else if rest.starts_with(b"<!") {
            skip_past(rest, b">")
        } else {
            break;
        };
        match skipped.and_then(|n| rest.get(n..)) {
            Some(after) => rest = after,
            None => return false,
        }
    }
    rest.strip_prefix(b"<svg").is_some_and(|after| {
        after
            .first()
            .is_some_and(|&b| b.is_ascii_whitespace() || b == b'>' || b == b'/')
    })
}

/// Where an icon comes from, once [`NetPolicy::check_icon_url`] accepted it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IconSource {
    /// An `https` URL on the server's origin. The driver fetches it without credentials and
    /// checks the body with [`NetPolicy::check_icon_bytes`] (module docs).
    Fetch(CheckedUrl),
    /// A `data:` icon, already decoded and checked.
    Data(DataIcon),
}

/// A decoded `data:` icon.
#[derive(Clone, PartialEq, Eq)]
pub struct DataIcon {
    /// Its format: declared by the media type, and confirmed by the bytes.
    pub kind: ImageKind,
    /// The image, at most [`MAX_ICON_BYTES`].
    pub bytes: Vec<u8>,
}

impl fmt::Debug for DataIcon {
    /// The kind and the length, not the bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataIcon")
            .field("kind", &self.kind)
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// Why an icon was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IconRejected {
    /// A scheme other than `https` (or `http` in development mode) and `data`.
    #[error(
        "an icon may only be an https URL on the server's origin or a data: URL, not {scheme:?}"
    )]
    SchemeNotAllowed {
        /// The scheme, lowercase.
        scheme: String,
    },
    /// An icon URL, or a redirect hop while fetching one, off the server's origin.
    #[error("it is not on the server's origin {expected}, the only one icons are fetched from")]
    CrossOrigin {
        /// The server's origin (`https://host:port`).
        expected: String,
    },
    /// A `data:` URL with no comma between its header and its data.
    #[error("the data: URL is malformed: it has no comma between its media type and its data")]
    MalformedDataUrl,
    /// A `data:` URL whose media type is not an allowed image type.
    #[error(
        "the media type {media_type:?} is not an icon type (image/png, image/jpeg, image/gif or \
         image/webp)"
    )]
    MediaTypeNotAllowed {
        /// The media type, `type/subtype`.
        media_type: String,
    },
    /// An SVG icon, and the policy does not say the host sanitizes SVG.
    #[error(
        "SVG icons can carry scripts, and are refused unless the host sanitizes SVG \
         (NetPolicy::allow_svg_icons)"
    )]
    SvgNotAllowed,
    /// A `data:` URL whose base64 does not decode.
    #[error("the data: URL's base64 data does not decode")]
    BadBase64,
    /// More bytes than [`MAX_ICON_BYTES`] (or a URL longer than [`MAX_ICON_URL_LEN`]).
    #[error("it is {len} bytes long, more than the limit of {max}")]
    TooLarge {
        /// The length seen.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Bytes that are not the declared image format.
    #[error("its bytes are not {declared} (they look like {})", found.map_or("no image format", ImageKind::media_type))]
    Mismatch {
        /// The format the media type declared.
        declared: ImageKind,
        /// What the bytes sniff as.
        found: Option<ImageKind>,
    },
    /// Bytes that are none of the accepted formats.
    #[error("its bytes are not PNG, JPEG, GIF, WebP or SVG")]
    NotAnImage,
}

impl NetPolicy {
    /// Checks an icon's `src` for the server at `server_url` (the URL the client talks to, as
    /// checked): an `https` URL on the same origin, fetched later, or a `data:` image, decoded
    /// and checked now. The [`icon`](crate::net_policy::icon) module docs hold the rules, and the driver's duties
    /// when it fetches an [`IconSource::Fetch`].
    pub fn check_icon_url(
        &self,
        icon: &str,
        server_url: &CheckedUrl,
    ) -> Result<IconSource, UrlRejected> {
        let fail = |reason, parsed: Option<&Url>| UrlRejected {
            purpose: UrlPurpose::Icon,
            subject: Subject::Url(super::url_check::shown(icon, parsed)),
            reason,
        };
        let icon_fail =
            |reason: IconRejected, parsed: Option<&Url>| fail(RejectReason::Icon(reason), parsed);
        if icon.len() > MAX_ICON_URL_LEN {
            return Err(icon_fail(
                IconRejected::TooLarge {
                    len: icon.len(),
                    max: MAX_ICON_URL_LEN,
                },
                None,
            ));
        }
        let parsed = Url::parse(icon).map_err(|e| fail(RejectReason::Unparsable(e), None))?;
        match parsed.scheme() {
            "data" => {}
            "https" | "http" => {
                let checked = self.check_url(icon, UrlPurpose::Icon)?;
                if !same_origin(server_url.url(), checked.url()) {
                    return Err(icon_fail(
                        IconRejected::CrossOrigin {
                            expected: server_url.url().origin().ascii_serialization(),
                        },
                        Some(&parsed),
                    ));
                }
                return Ok(IconSource::Fetch(checked));
            }
            other => {
                return Err(icon_fail(
                    IconRejected::SchemeNotAllowed {
                        scheme: other.to_owned(),
                    },
                    Some(&parsed),
                ))
            }
        }
        // A data: URL is decoded here, never fetched or opened, so the whitespace a
        // percent-encoded image may hold is harmless; other control characters are not.
        if icon
            .bytes()
            .any(|b| (b < b' ' || b == 0x7f) && !b.is_ascii_whitespace())
        {
            return Err(fail(RejectReason::ControlOrWhitespace, None));
        }
        self.decode_data_icon(icon)
            .map(IconSource::Data)
            .map_err(|reason| icon_fail(reason, None))
    }

    fn decode_data_icon(&self, icon: &str) -> Result<DataIcon, IconRejected> {
        let data = DataUrl::process(icon).map_err(|_| IconRejected::MalformedDataUrl)?;
        let mime = data.mime_type();
        let declared = ImageKind::from_media_type(&mime.type_, &mime.subtype).ok_or_else(|| {
            IconRejected::MediaTypeNotAllowed {
                media_type: format!("{}/{}", mime.type_, mime.subtype),
            }
        })?;
        if declared == ImageKind::Svg && !self.allow_svg_icons {
            return Err(IconRejected::SvgNotAllowed);
        }
        let (bytes, _fragment) = data.decode_to_vec().map_err(|_| IconRejected::BadBase64)?;
        if bytes.len() > MAX_ICON_BYTES {
            return Err(IconRejected::TooLarge {
                len: bytes.len(),
                max: MAX_ICON_BYTES,
            });
        }
        let found = sniff_image(&bytes);
        if found != Some(declared) {
            return Err(IconRejected::Mismatch { declared, found });
        }
        Ok(DataIcon {
            kind: declared,
            bytes,
        })
    }

    /// Checks an icon's bytes (a fetched body, or a decoded `data:` URL): at most
    /// [`MAX_ICON_BYTES`], and one of the accepted formats by its leading bytes
    /// ([`sniff_image`]); SVG only with [`NetPolicy::allow_svg_icons`]. A `Content-Type` is not
    /// consulted: servers mislabel, and the bytes are what a decoder will read.
    pub fn check_icon_bytes(&self, bytes: &[u8]) -> Result<ImageKind, IconRejected> {
        if bytes.len() > MAX_ICON_BYTES {
            return Err(IconRejected::TooLarge {
                len: bytes.len(),
                max: MAX_ICON_BYTES,
            });
        }
        match sniff_image(bytes) {
            None => Err(IconRejected::NotAnImage),
            Some(ImageKind::Svg) if !self.allow_svg_icons => Err(IconRejected::SvgNotAllowed),
            Some(kind) => Ok(kind),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_numbers_name_the_format() {
        assert_eq!(sniff_image(b"\x89PNG\r\n\x1a\nrest"), Some(ImageKind::Png));
        assert_eq!(sniff_image(b"\xff\xd8\xff\xe0"), Some(ImageKind::Jpeg));
        assert_eq!(sniff_image(b"GIF89a..."), Some(ImageKind::Gif));
        assert_eq!(sniff_image(b"RIFF\0\0\0\0WEBPVP8 "), Some(ImageKind::Webp));
        assert_eq!(sniff_image(b"RIFF\0\0\0\0WAVE"), None);
        assert_eq!(sniff_image(b"\x89PNG"), None);
        assert_eq!(sniff_image(b""), None);
        assert_eq!(sniff_image(b"<html><svg>"), None);
    }

    #[test]
    fn svg_is_found_after_the_prolog() {
        let doc = b"\xef\xbb\xbf <?xml version=\"1.0\"?>\n<!-- made by hand -->\n\
                    <!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"x\">\n<svg xmlns=\"x\"/>";
        assert_eq!(sniff_image(doc), Some(ImageKind::Svg));
        assert_eq!(sniff_image(b"<svg>"), Some(ImageKind::Svg));
        assert_eq!(sniff_image(b"<svgx>"), None);
        assert_eq!(sniff_image(b"<!-- unterminated <svg>"), None);
    }
}
