//! The CRI `ImageService`: present so clients that open both services connect, but crio-lite has
//! no images: the list is empty and pulls are refused.

use cri_api::v1 as cri;
use cri_api::v1::image_service_server::ImageService;
use tonic::{Request, Response, Status};

/// Serves ImageService with no images.
#[derive(Debug, Default)]
pub(crate) struct ImageApi;

fn no_images(rpc: &str) -> Status {
    Status::unimplemented(format!(
        "{rpc}: crio-lite has no images; it manages pod sandboxes and their networks only"
    ))
}

#[tonic::async_trait]
impl ImageService for ImageApi {
    async fn list_images(
        &self,
        _request: Request<cri::ListImagesRequest>,
    ) -> Result<Response<cri::ListImagesResponse>, Status> {
        Ok(Response::new(cri::ListImagesResponse {
            images: Vec::new(),
        }))
    }

    async fn image_status(
        &self,
        _request: Request<cri::ImageStatusRequest>,
    ) -> Result<Response<cri::ImageStatusResponse>, Status> {
        Err(no_images("ImageStatus"))
    }

    async fn pull_image(
        &self,
        _request: Request<cri::PullImageRequest>,
    ) -> Result<Response<cri::PullImageResponse>, Status> {
        Err(no_images("PullImage"))
    }

    async fn remove_image(
        &self,
        _request: Request<cri::RemoveImageRequest>,
    ) -> Result<Response<cri::RemoveImageResponse>, Status> {
        Err(no_images("RemoveImage"))
    }

    async fn image_fs_info(
        &self,
        _request: Request<cri::ImageFsInfoRequest>,
    ) -> Result<Response<cri::ImageFsInfoResponse>, Status> {
        Ok(Response::new(cri::ImageFsInfoResponse {
            image_filesystems: Vec::new(),
            container_filesystems: Vec::new(),
        }))
    }
}
