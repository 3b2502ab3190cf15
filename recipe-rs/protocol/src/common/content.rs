//! Message content as parts (text and images), joined into one message text.

use recipe_core::profile::ImageHandling;
use recipe_core::{ImageData, ImageDetail, ImageSource, ImageText, ModelVersion};

/// An image part of a request, before the model version decides how it is shown.
pub struct ImagePart {
    pub data: ImageData,
    pub detail: ImageDetail,
}

/// Text and images of one message, in order.
pub enum Part {
    Text(String),
    Image(ImagePart),
}

pub const UNSUPPORTED_IMAGE: &str = "[Unsupported Image]";

/// Whether the model sees images (as placeholders with checked sources) or only the
/// `[Unsupported Image]` text (see the profile's [`ImageHandling`]).
pub fn shows_images(version: ModelVersion) -> bool {
    version.profile().conversion.images == ImageHandling::Placeholder
}

/// Join parts with blank lines; images become the image placeholder (V4.1, its position
/// recorded in the returned [`ImageText`]) or the `[Unsupported Image]` text (V4, which drops the
/// source).
pub fn join_parts(
    parts: Vec<Part>,
    version: ModelVersion,
    image_token: &str,
    path: &str,
) -> (ImageText, Vec<ImageSource>) {
    let mut text = ImageText::default();
    let mut images = Vec::new();
    for (k, part) in parts.into_iter().enumerate() {
        if k > 0 {
            text.push_text("\n\n");
        }
        match part {
            Part::Text(t) => text.push_text(&t),
            Part::Image(img) => match version.profile().conversion.images {
                ImageHandling::UnsupportedText => text.push_text(UNSUPPORTED_IMAGE),
                ImageHandling::Placeholder => {
                    text.push_placeholder(image_token);
                    images.push(ImageSource {
                        data: img.data,
                        detail: img.detail,
                        path: path.to_owned(),
                    });
                }
            },
        }
    }
    (text, images)
}

/// Classify an image URL: `data:` URLs and http(s) URLs are accepted.
pub fn image_data_from_url(url: &str) -> Option<ImageData> {
    if url.starts_with("data:") {
        Some(ImageData::DataUrl(url.to_owned()))
    } else if url.starts_with("http://") || url.starts_with("https://") {
        Some(ImageData::Url(url.to_owned()))
    } else {
        None
    }
}
