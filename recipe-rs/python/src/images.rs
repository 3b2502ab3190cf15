//! Bindings of the image stage (`recipe-images`): `ImageResolver`, `ReqwestImageFetcher`,
//! `OpenCvImagePreprocessor`, `PreprocessOptions`, `ImageQuota`, `ImageInfo`, `MultiModalData`
//! and the `ImageError` / `CalcResizeError` exceptions. Logic lives in the crate.

use std::net::IpAddr;
use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes};
use recipe_images::error::LocatedImageError;
use recipe_images::fetch::ImageFetcher;
use recipe_images::{
    Detail, ImageError as CrateImageError, ImageInfo, ImageQuota, ImageResolver, ImageTokenSpec,
    PreprocessOptions, RetryPolicy,
};

use crate::conversation::PyImageSource;

create_exception!(
    _native,
    ImageError,
    PyException,
    "An image could not be resolved, fetched or preprocessed; `kind` names the failure and `is_retryable` says whether another attempt may succeed."
);
create_exception!(
    _native,
    CalcResizeError,
    PyValueError,
    "Fitting an image to the V4.1 token budget did not converge."
);

fn raise(kind: &str, retryable: bool, message: String) -> PyErr {
    Python::with_gil(|py| {
        let err = ImageError::new_err(message);
        let value = err.value(py);
        let _ = value.setattr("kind", kind);
        let _ = value.setattr("is_retryable", retryable);
        err
    })
}

/// An error of a call that handles one image with no request location (`image[0]: …`).
fn image_error(e: &CrateImageError) -> PyErr {
    raise(e.kind.name(), e.kind.is_retryable(), e.message("", 0))
}

fn located_error(e: &LocatedImageError) -> PyErr {
    raise(
        e.error.kind.name(),
        e.error.kind.is_retryable(),
        e.message.clone(),
    )
}

/// One preprocessed image: its encoded bytes and its pixel size.
///
/// `ImageInfo(data, width, height)`; `OpenCvImagePreprocessor.preprocess` returns one.
#[pyclass(name = "ImageInfo", module = "deepseek_recipe._native", frozen)]
#[derive(Clone)]
pub struct PyImageInfo {
    inner: ImageInfo,
}

#[pymethods]
impl PyImageInfo {
    #[new]
    fn new(data: Vec<u8>, width: u32, height: u32) -> Self {
        Self {
            inner: ImageInfo {
                data,
                width,
                height,
            },
        }
    }
    /// The encoded image bytes.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.data)
    }
    /// Width in pixels.
    #[getter]
    fn width(&self) -> u32 {
        self.inner.width
    }
    /// Height in pixels.
    #[getter]
    fn height(&self) -> u32 {
        self.inner.height
    }
}

/// The images resolved for one request, in prompt order.
///
/// `MultiModalData(images=None)`; `ImageResolver.resolve` returns one.
#[pyclass(name = "MultiModalData", module = "deepseek_recipe._native", frozen)]
pub struct PyMultiModalData {
    images: Vec<ImageInfo>,
}

#[pymethods]
impl PyMultiModalData {
    #[new]
    #[pyo3(signature = (images=None))]
    fn new(
        #[pyo3(from_py_with = crate::args::opt_instances::<PyImageInfo>)] images: Option<
            Vec<PyRef<'_, PyImageInfo>>,
        >,
    ) -> Self {
        Self {
            images: images
                .unwrap_or_default()
                .iter()
                .map(|i| i.inner.clone())
                .collect(),
        }
    }
    /// The images, in the order of their placeholders.
    #[getter]
    fn images(&self) -> Vec<PyImageInfo> {
        self.images
            .iter()
            .map(|i| PyImageInfo { inner: i.clone() })
            .collect()
    }
    /// True when there are no images.
    fn is_empty(&self) -> bool {
        self.images.is_empty()
    }
    /// Sum over images of (tokens − 1): each image already holds one placeholder.
    fn image_token_adjustment(&self) -> PyResult<i64> {
        let spec = ImageTokenSpec::V41;
        let mut total = 0i64;
        for i in &self.images {
            let t = spec
                .tokens(i.width as usize, i.height as usize)
                .map_err(|e| CalcResizeError::new_err(e.to_string()))?;
            total += t as i64 - 1;
        }
        Ok(total)
    }
}

/// Running totals of the images a resolver has accepted for one request.
///
/// `ImageQuota()` starts at zero; pass the same quota to every `ImageResolver.resolve` call of
/// a request so its limits cover them all.
#[pyclass(name = "ImageQuota", module = "deepseek_recipe._native")]
pub struct PyImageQuota {
    inner: ImageQuota,
}

#[pymethods]
impl PyImageQuota {
    #[new]
    fn new() -> Self {
        Self {
            inner: ImageQuota::default(),
        }
    }
    /// Images counted so far.
    fn image_count(&self) -> u64 {
        self.inner.image_count
    }
    /// Encoded bytes counted so far.
    fn byte_size(&self) -> u64 {
        self.inner.byte_size
    }
}

/// How an image is resized before it is encoded.
///
/// `PreprocessOptions(detail, max_dimension_px, low_detail_max_dimension_px)`: `detail` is
/// `"low"`, `"high"`, `"original"` or `"auto"`; the two limits cap the longer side in pixels.
#[pyclass(name = "PreprocessOptions", module = "deepseek_recipe._native", frozen)]
pub struct PyPreprocessOptions {
    inner: PreprocessOptions,
}

#[pymethods]
impl PyPreprocessOptions {
    #[new]
    fn new(
        #[pyo3(from_py_with = crate::args::string)] detail: String,
        max_dimension_px: i64,
        low_detail_max_dimension_px: i64,
    ) -> PyResult<Self> {
        let d = Detail::parse(&detail).ok_or_else(|| {
            PyValueError::new_err(format!(
                "invalid detail {detail:?}; expected \"low\", \"high\", \"original\", or \"auto\""
            ))
        })?;
        let in_u32 = |v: i64| (0..=u32::MAX as i64).contains(&v);
        if !in_u32(max_dimension_px) || !in_u32(low_detail_max_dimension_px) {
            return Err(pyo3::exceptions::PyOverflowError::new_err(
                "out of range integral type conversion attempted",
            ));
        }
        let (max_dimension_px, low_detail_max_dimension_px) =
            (max_dimension_px as u64, low_detail_max_dimension_px as u64);
        let inner = PreprocessOptions::new(d, max_dimension_px, low_detail_max_dimension_px)
            .map_err(|e| PyValueError::new_err(e.public))?;
        Ok(Self { inner })
    }
    /// The detail level: `"low"`, `"high"`, `"original"` or `"auto"`.
    #[getter]
    fn detail(&self) -> &'static str {
        self.inner.detail.as_str()
    }
    /// Longest side, in pixels, of an image not at low detail.
    #[getter]
    fn max_dimension_px(&self) -> u32 {
        self.inner.max_dimension_px
    }
    /// Longest side, in pixels, of an image at low detail.
    #[getter]
    fn low_detail_max_dimension_px(&self) -> u32 {
        self.inner.low_detail_max_dimension_px
    }
}

/// Downloads images given by URL over HTTP(S), with a size cap (32 MiB unless
/// `with_max_bytes` sets another).
///
/// Immutable: the `with_*` methods return configured copies. `fetch` makes one attempt. Proxies
/// come from the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`) as it is
/// when the fetcher is made; a fetcher with a destination filter uses no proxy.
#[pyclass(
    name = "ReqwestImageFetcher",
    module = "deepseek_recipe._native",
    frozen
)]
#[derive(Clone)]
pub struct PyReqwestImageFetcher {
    inner: ImageFetcher,
}

/// Ask a Python callable; an exception or a non-`bool` answer rejects the address.
fn python_filter(callable: Py<PyAny>) -> recipe_images::DestinationFilter {
    Arc::new(move |host: &str, addr: &IpAddr| {
        Python::with_gil(|py| match callable.call1(py, (host, addr.to_string())) {
            Ok(v) => v
                .bind(py)
                .downcast::<PyBool>()
                .map(|b| b.is_true())
                .unwrap_or(false),
            Err(_) => false,
        })
    })
}

#[pymethods]
impl PyReqwestImageFetcher {
    #[new]
    fn new() -> Self {
        Self {
            inner: ImageFetcher::default(),
        }
    }
    /// A fetcher that refuses responses larger than `max_bytes` bytes.
    #[staticmethod]
    fn with_max_bytes(max_bytes: u64) -> Self {
        Self {
            inner: ImageFetcher::with_max_bytes(max_bytes),
        }
    }
    /// A copy that connects only where `destination_filter(host, ip)` returns `True`; an
    /// exception or a non-`bool` answer refuses the address.
    fn with_destination_filter(&self, destination_filter: &Bound<'_, PyAny>) -> PyResult<Self> {
        if !destination_filter.is_callable() {
            return Err(PyTypeError::new_err("destination_filter must be callable"));
        }
        Ok(Self {
            inner: self
                .inner
                .with_filter(python_filter(destination_filter.clone().unbind())),
        })
    }
    /// A fetcher that refuses loopback, private, link-local, CGNAT/metadata and other
    /// non-public addresses on every hop (ours; the official package ships no filter).
    fn with_public_destinations_only(&self) -> Self {
        Self {
            inner: self
                .inner
                .with_filter(recipe_images::deny_private_destinations()),
        }
    }
    /// The body at `url`, as bytes; `ImageError` when it cannot be fetched.
    fn fetch<'py>(
        &self,
        py: Python<'py>,
        #[pyo3(from_py_with = crate::args::string)] url: String,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let fetcher = self.inner.clone();
        let bytes = py
            .allow_threads(|| fetcher.fetch(&url))
            .map_err(|e| image_error(&e))?;
        Ok(PyBytes::new(py, &bytes))
    }
}

/// Decodes an image, resizes it as the options say, and encodes it again.
#[pyclass(
    name = "OpenCvImagePreprocessor",
    module = "deepseek_recipe._native",
    frozen
)]
#[derive(Clone)]
pub struct PyOpenCvImagePreprocessor;

#[pymethods]
impl PyOpenCvImagePreprocessor {
    #[new]
    fn new() -> Self {
        Self
    }
    /// The preprocessed image of the encoded bytes `data`; `ImageError` when they do not decode.
    fn preprocess(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = crate::args::byte_vec)] data: Vec<u8>,
        #[pyo3(from_py_with = crate::args::instance::<PyPreprocessOptions>)] options: PyRef<
            '_,
            PyPreprocessOptions,
        >,
    ) -> PyResult<PyImageInfo> {
        let opts = options.inner;
        let info = py
            .allow_threads(|| recipe_images::preprocess(&data, &opts))
            .map_err(|e| image_error(&e))?;
        Ok(PyImageInfo { inner: info })
    }
}

/// Turns the image sources of a request into preprocessed images.
///
/// `ImageResolver(fetcher, preprocessor)`: URLs are fetched with `fetcher`; a download that
/// fails with a retryable error is tried up to 4 times, 0.3 s, 0.6 s and 1 s apart.
/// `retry_waits` (ours): other waits in seconds, one attempt more than there are waits (`[]`:
/// no retry); at most 16 waits of at most 60 s each.
#[pyclass(name = "ImageResolver", module = "deepseek_recipe._native", frozen)]
pub struct PyImageResolver {
    inner: ImageResolver,
}

#[pymethods]
impl PyImageResolver {
    #[new]
    #[pyo3(signature = (fetcher, preprocessor, *, retry_waits = None))]
    fn new(
        #[pyo3(from_py_with = crate::args::instance::<PyReqwestImageFetcher>)] fetcher: PyRef<
            '_,
            PyReqwestImageFetcher,
        >,
        #[pyo3(from_py_with = crate::args::instance::<PyOpenCvImagePreprocessor>)]
        preprocessor: PyRef<'_, PyOpenCvImagePreprocessor>,
        retry_waits: Option<Vec<f64>>,
    ) -> PyResult<Self> {
        let _ = preprocessor;
        let mut inner = ImageResolver::new(fetcher.inner.clone());
        if let Some(waits) = retry_waits {
            inner.retry = RetryPolicy::from_secs(&waits).map_err(PyValueError::new_err)?;
        }
        Ok(Self { inner })
    }
    /// The images of `sources`, in order, counted against `quota`; `ImageError` names the
    /// first one that fails.
    fn resolve(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = crate::args::instances::<PyImageSource>)] sources: Vec<
            PyRef<'_, PyImageSource>,
        >,
        #[pyo3(from_py_with = crate::args::instance_mut::<PyImageQuota>)] mut quota: PyRefMut<
            '_,
            PyImageQuota,
        >,
    ) -> PyResult<PyMultiModalData> {
        // Borrowed, not copied: a source may hold a data URL of any size.
        let sources: Vec<&recipe_core::ImageSource> = sources.iter().map(|s| &s.inner).collect();
        let resolver = &self.inner;
        let mut q = quota.inner;
        let images = py
            .allow_threads(|| resolver.resolve(&sources, &mut q))
            .map_err(|e| located_error(&e))?;
        quota.inner = q;
        Ok(PyMultiModalData { images })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ImageError", m.py().get_type::<ImageError>())?;
    m.add("CalcResizeError", m.py().get_type::<CalcResizeError>())?;
    m.add_class::<PyImageInfo>()?;
    m.add_class::<PyMultiModalData>()?;
    m.add_class::<PyImageQuota>()?;
    m.add_class::<PyPreprocessOptions>()?;
    m.add_class::<PyReqwestImageFetcher>()?;
    m.add_class::<PyOpenCvImagePreprocessor>()?;
    m.add_class::<PyImageResolver>()?;
    Ok(())
}
