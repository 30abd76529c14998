//! The CRI `ImageService` over the node's [`Images`]: requests checked and turned into store
//! calls, images and store errors turned into CRI answers and statuses.

use std::collections::HashMap;

use cri_api::v1 as cri;
use cri_api::v1::image_service_server::ImageService;
use image_store::{Auth, Image, ImageConfiguration, RegistryRefusal};
use serde_json::json;
use tonic::{Request, Response, Status};

use crate::domain::Images;

/// The longest image reference or query accepted (distribution allows 255 for the name, plus a
/// tag or digest).
const IMAGE_TEXT_MAX: usize = 512;

/// Serves ImageService from the node's image store.
#[derive(Debug, Clone)]
pub(crate) struct ImageApi {
    images: Images,
}

impl ImageApi {
    pub(crate) fn new(images: Images) -> ImageApi {
        ImageApi { images }
    }
}

/// The image a request names: present, not too long.
fn image_text<'a>(spec: Option<&'a cri::ImageSpec>, rpc: &str) -> Result<&'a str, Status> {
    let text = spec.map_or("", |s| s.image.as_str());
    if text.is_empty() {
        return Err(Status::invalid_argument(format!(
            "{rpc}: image is required (ImageSpec.image is empty)"
        )));
    }
    if text.len() > IMAGE_TEXT_MAX {
        return Err(Status::invalid_argument(format!(
            "{rpc}: image is {} bytes long, more than the {IMAGE_TEXT_MAX} allowed",
            text.len()
        )));
    }
    Ok(text)
}

/// The credentials CRI's AuthConfig carries, in the order containers/image prefers them: a
/// registry token, a user name and password, then `auth` (base64 of `user:password`). `None`
/// when it carries none, so the global auth file is asked.
pub(crate) fn auth_from_cri(config: Option<&cri::AuthConfig>) -> Result<Option<Auth>, Status> {
    let Some(config) = config else {
        return Ok(None);
    };
    if !config.registry_token.is_empty() {
        return Ok(Some(Auth::Bearer(config.registry_token.clone())));
    }
    if !config.identity_token.is_empty() {
        return Err(Status::invalid_argument(
            "PullImage: AuthConfig.identity_token (an OAuth2 refresh token) is not supported yet; \
             send a registry_token, a username and password, or auth",
        ));
    }
    if !config.username.is_empty() {
        return Ok(Some(Auth::Basic {
            username: config.username.clone(),
            password: config.password.clone(),
        }));
    }
    if !config.auth.is_empty() {
        return Auth::from_base64_basic(&config.auth)
            .map(Some)
            .map_err(|e| Status::invalid_argument(format!("PullImage: AuthConfig.auth: {e}")));
    }
    Ok(None)
}

/// A store error as the CRI status kubelet acts on.
pub(crate) fn status_of(error: &image_store::Error) -> Status {
    use image_store::Error as E;
    let message = super::capped_message(error.to_string());
    match error {
        E::InvalidReference { .. }
        | E::InvalidDigest { .. }
        | E::InvalidAuth { .. }
        | E::Ambiguous { .. }
        | E::ShortName { .. } => Status::invalid_argument(message),
        E::NotFound { .. } => Status::not_found(message),
        // The node's rules refuse the image, the node's files cannot be used, or no manifest
        // is for this node.
        E::PolicyRefused { .. }
        | E::Blocked { .. }
        | E::ImageInUse { .. }
        | E::InvalidPolicy { .. }
        | E::InvalidRegistries { .. }
        | E::NoPolicy { .. }
        | E::NoMatchingPlatform { .. }
        | E::AuthFile { .. } => Status::failed_precondition(message),
        E::Registry { .. } | E::AllSourcesFailed { .. } => match error.registry_refusal() {
            Some(RegistryRefusal::NotFound) => Status::not_found(message),
            Some(RegistryRefusal::Unauthorized) => Status::permission_denied(message),
            _ => Status::unavailable(message),
        },
        E::Timeout { .. } | E::NoProgress { .. } => Status::deadline_exceeded(message),
        // The node's disk is full: kubelet's image garbage collection is what helps.
        E::Blob { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => {
            Status::resource_exhausted(message)
        }
        // The connection broke in the middle of a blob; the store is closed.
        E::Blob { op: "download", .. } | E::Locked { .. } => Status::unavailable(message),
        // The image is at fault (a bad blob, a hostile layer): the message names it.
        E::Malformed { .. }
        | E::DigestMismatch { .. }
        | E::SizeMismatch { .. }
        | E::Layer { .. } => Status::unknown(message),
        _ => Status::internal(message),
    }
}

/// `User` of an image configuration as CRI wants it: a numeric user (alone or before `:group`)
/// is the uid, anything else the user name.
fn user_of(config: Option<&ImageConfiguration>) -> (Option<i64>, String) {
    let user = config
        .and_then(|c| c.config().as_ref())
        .and_then(|c| c.user().clone())
        .unwrap_or_default();
    let name = user.split(':').next().unwrap_or_default();
    match name.parse::<i64>() {
        Ok(uid) => (Some(uid), String::new()),
        Err(_) => (None, name.to_owned()),
    }
}

fn to_cri(image: &Image, config: Option<&ImageConfiguration>) -> cri::Image {
    let (uid, username) = user_of(config);
    cri::Image {
        id: image.id.clone(),
        repo_tags: image.names.clone(),
        repo_digests: image.repo_digests.clone(),
        size: image.size,
        uid: uid.map(|value| cri::Int64Value { value }),
        username,
        spec: Some(cri::ImageSpec {
            image: image.id.clone(),
            ..cri::ImageSpec::default()
        }),
        pinned: false,
    }
}

/// `ImageStatus`'s verbose `info`: what the store knows of the image and its configuration.
fn verbose_info(image: &Image, config: Option<&ImageConfiguration>) -> HashMap<String, String> {
    let info = json!({
        "id": image.id,
        "names": image.names,
        "repoDigests": image.repo_digests,
        "manifestDigest": image.manifest_digest.to_string(),
        "indexDigest": image.index_digest.as_ref().map(ToString::to_string),
        "configDigest": image.config_digest.to_string(),
        "platform": image.platform,
        "layers": image.layers,
        "size": image.size,
        "pulledAt": image.pulled_at,
        "imageSpec": config,
    });
    HashMap::from([("info".to_owned(), info.to_string())])
}

impl ImageApi {
    /// The image with its configuration; a configuration that cannot be read leaves uid and
    /// user name empty, logged (the image itself is still listed).
    fn with_config(&self, image: Image) -> (Image, Option<ImageConfiguration>) {
        match self.images.config(&image) {
            Ok(config) => (image, Some(config)),
            Err(e) => {
                tracing::warn!(image = %image.id, error = %e, "cannot read image configuration");
                (image, None)
            }
        }
    }
}

#[tonic::async_trait]
impl ImageService for ImageApi {
    async fn list_images(
        &self,
        request: Request<cri::ListImagesRequest>,
    ) -> Result<Response<cri::ListImagesResponse>, Status> {
        let filter = request
            .get_ref()
            .filter
            .as_ref()
            .and_then(|f| f.image.as_ref())
            .map(|spec| spec.image.as_str())
            .filter(|text| !text.is_empty());
        let found = match filter {
            Some(query) => match self.images.get(query) {
                Ok(image) => vec![image],
                Err(
                    image_store::Error::NotFound { .. }
                    | image_store::Error::InvalidReference { .. },
                ) => Vec::new(),
                Err(e) => return Err(status_of(&e)),
            },
            None => self.images.list().map_err(|e| status_of(&e))?,
        };
        let images = found
            .into_iter()
            .map(|image| {
                let (image, config) = self.with_config(image);
                to_cri(&image, config.as_ref())
            })
            .collect();
        Ok(Response::new(cri::ListImagesResponse { images }))
    }

    async fn image_status(
        &self,
        request: Request<cri::ImageStatusRequest>,
    ) -> Result<Response<cri::ImageStatusResponse>, Status> {
        let request = request.get_ref();
        let query = image_text(request.image.as_ref(), "ImageStatus")?;
        let image = match self.images.get(query) {
            Ok(image) => image,
            // CRI: an image that is not there is an empty answer, not an error.
            Err(image_store::Error::NotFound { .. }) => {
                return Ok(Response::new(cri::ImageStatusResponse::default()));
            }
            Err(e) => return Err(status_of(&e)),
        };
        let (image, config) = self.with_config(image);
        let info = if request.verbose {
            verbose_info(&image, config.as_ref())
        } else {
            HashMap::new()
        };
        Ok(Response::new(cri::ImageStatusResponse {
            image: Some(to_cri(&image, config.as_ref())),
            info,
        }))
    }

    async fn pull_image(
        &self,
        request: Request<cri::PullImageRequest>,
    ) -> Result<Response<cri::PullImageResponse>, Status> {
        let request = request.into_inner();
        let reference = image_text(request.image.as_ref(), "PullImage")?;
        let auth = auth_from_cri(request.auth.as_ref())?;
        let image = self
            .images
            .pull(reference, auth)
            .await
            .map_err(|e| status_of(&e))?;
        Ok(Response::new(cri::PullImageResponse {
            image_ref: image.id,
        }))
    }

    async fn remove_image(
        &self,
        request: Request<cri::RemoveImageRequest>,
    ) -> Result<Response<cri::RemoveImageResponse>, Status> {
        let query = image_text(request.get_ref().image.as_ref(), "RemoveImage")?;
        match self.images.remove(query).await {
            // CRI: removing an image that is already gone succeeds.
            Ok(_) | Err(image_store::Error::NotFound { .. }) => {
                Ok(Response::new(cri::RemoveImageResponse {}))
            }
            Err(e) => Err(status_of(&e)),
        }
    }

    async fn image_fs_info(
        &self,
        _request: Request<cri::ImageFsInfoRequest>,
    ) -> Result<Response<cri::ImageFsInfoResponse>, Status> {
        let usage = self.images.disk_usage().map_err(|e| status_of(&e))?;
        let image_fs = cri::FilesystemUsage {
            timestamp: super::now_nanos(),
            fs_id: Some(cri::FilesystemIdentifier {
                mountpoint: self.images.root().display().to_string(),
            }),
            used_bytes: Some(cri::UInt64Value { value: usage.bytes }),
            inodes_used: Some(cri::UInt64Value {
                value: usage.inodes,
            }),
        };
        let containers = self
            .images
            .containers_disk_usage()
            .map_err(|e| status_of(&e))?;
        let container_fs = cri::FilesystemUsage {
            timestamp: image_fs.timestamp,
            fs_id: image_fs.fs_id.clone(),
            used_bytes: Some(cri::UInt64Value {
                value: containers.bytes,
            }),
            inodes_used: Some(cri::UInt64Value {
                value: containers.inodes,
            }),
        };
        Ok(Response::new(cri::ImageFsInfoResponse {
            image_filesystems: vec![image_fs],
            container_filesystems: vec![container_fs],
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn auth_config(f: impl FnOnce(&mut cri::AuthConfig)) -> cri::AuthConfig {
        let mut config = cri::AuthConfig::default();
        f(&mut config);
        config
    }

    #[test]
    fn cri_credentials_map_to_the_store_s() {
        let basic = |u: &str, p: &str| Auth::Basic {
            username: u.into(),
            password: p.into(),
        };
        assert_eq!(auth_from_cri(None).unwrap(), None);
        assert_eq!(
            auth_from_cri(Some(&cri::AuthConfig::default())).unwrap(),
            None
        );
        let both = auth_config(|c| {
            c.username = "u".into();
            c.password = "p".into();
            c.auth = "ignored".into();
        });
        assert_eq!(auth_from_cri(Some(&both)).unwrap(), Some(basic("u", "p")));
        // base64("me:secret")
        let encoded = auth_config(|c| c.auth = "bWU6c2VjcmV0".into());
        assert_eq!(
            auth_from_cri(Some(&encoded)).unwrap(),
            Some(basic("me", "secret"))
        );
        let token = auth_config(|c| {
            c.registry_token = "tok".into();
            c.username = "u".into();
        });
        assert_eq!(
            auth_from_cri(Some(&token)).unwrap(),
            Some(Auth::Bearer("tok".into()))
        );
        let bad = auth_config(|c| c.auth = "not base64!".into());
        let err = auth_from_cri(Some(&bad)).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains("AuthConfig.auth"),
            "{}",
            err.message()
        );
        let identity = auth_config(|c| c.identity_token = "refresh".into());
        let err = auth_from_cri(Some(&identity)).unwrap_err();
        assert!(
            err.message().contains("identity_token"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn image_text_is_required_and_bounded() {
        let spec = |image: &str| cri::ImageSpec {
            image: image.into(),
            ..cri::ImageSpec::default()
        };
        assert_eq!(
            image_text(None, "PullImage").unwrap_err().code(),
            Code::InvalidArgument
        );
        assert_eq!(
            image_text(Some(&spec("")), "PullImage").unwrap_err().code(),
            Code::InvalidArgument
        );
        let long = "a".repeat(IMAGE_TEXT_MAX + 1);
        let err = image_text(Some(&spec(&long)), "PullImage").unwrap_err();
        assert!(err.message().contains("513 bytes"), "{}", err.message());
        assert_eq!(image_text(Some(&spec("busybox")), "X").unwrap(), "busybox");
    }

    #[test]
    fn user_is_a_uid_or_a_name() {
        let config = |user: &str| -> ImageConfiguration {
            serde_json::from_value(json!({
                "architecture": "amd64", "os": "linux",
                "rootfs": {"type": "layers", "diff_ids": []},
                "config": {"User": user}
            }))
            .expect("config")
        };
        assert_eq!(user_of(Some(&config("1000"))), (Some(1000), String::new()));
        assert_eq!(user_of(Some(&config("0:0"))), (Some(0), String::new()));
        assert_eq!(user_of(Some(&config("nobody"))), (None, "nobody".into()));
        assert_eq!(
            user_of(Some(&config("www-data:www-data"))),
            (None, "www-data".into())
        );
        assert_eq!(user_of(Some(&config(""))), (None, String::new()));
        assert_eq!(user_of(None), (None, String::new()));
    }

    #[test]
    fn store_errors_become_the_statuses_kubelet_acts_on() {
        let cases = [
            (
                image_store::Error::NotFound { query: "x".into() },
                Code::NotFound,
            ),
            (
                image_store::Error::InvalidAuth { reason: "r".into() },
                Code::InvalidArgument,
            ),
            (
                image_store::Error::Timeout {
                    image: "i".into(),
                    op: "fetch the manifest".into(),
                    after: std::time::Duration::from_secs(1),
                },
                Code::DeadlineExceeded,
            ),
            (
                image_store::Error::NoMatchingPlatform {
                    image: "i".into(),
                    wanted: "linux/amd64".into(),
                    available: vec!["linux/s390x".into()],
                },
                Code::FailedPrecondition,
            ),
            (
                image_store::Error::DigestMismatch {
                    image: "i".into(),
                    expected: "sha256:a".into(),
                    actual: "sha256:b".into(),
                },
                Code::Unknown,
            ),
            (
                image_store::Error::Blob {
                    image: "i".into(),
                    blob: "sha256:a".into(),
                    op: "write",
                    source: std::sync::Arc::new(std::io::Error::from_raw_os_error(28)),
                },
                Code::ResourceExhausted,
            ),
            (
                image_store::Error::Blob {
                    image: "i".into(),
                    blob: "sha256:a".into(),
                    op: "download",
                    source: std::sync::Arc::new(std::io::ErrorKind::ConnectionReset.into()),
                },
                Code::Unavailable,
            ),
        ];
        for (error, code) in cases {
            let status = status_of(&error);
            assert_eq!(status.code(), code, "{error}");
            assert_eq!(status.message(), error.to_string());
        }
    }
}
