//! Bindings for the tool catalogue's search index (`toolsearch`).

use pyo3::prelude::*;

use crate::errors::{argument, guard};
use toolroute_toolsearch::{Document, Index};

/// A document as Python passes it: (name, namespace, description, [(parameter, its text)]).
type DocumentTuple = (String, String, String, Vec<(String, String)>);

/// One catalogue's index, built once and searched by many requests at once (it is immutable).
#[pyclass(frozen, name = "ToolSearchIndex", module = "toolroute._core")]
pub struct PyToolSearchIndex {
    index: Index,
}

/// `allowed` document numbers as a mask over the index (None: every document).
fn mask(allowed: Option<Vec<usize>>, len: usize) -> PyResult<Option<Vec<bool>>> {
    let Some(numbers) = allowed else {
        return Ok(None);
    };
    let mut mask = vec![false; len];
    for n in numbers {
        *mask
            .get_mut(n)
            .ok_or_else(|| argument(format!("document {n} is not in this index of {len}")))? = true;
    }
    Ok(Some(mask))
}

#[pymethods]
impl PyToolSearchIndex {
    /// `documents`: (name, namespace, description, [(parameter name, parameter text)]) each.
    #[new]
    fn new(py: Python<'_>, documents: Vec<DocumentTuple>) -> PyResult<Self> {
        guard(|| {
            let documents = documents
                .into_iter()
                .map(|(name, namespace, description, parameters)| Document {
                    name,
                    namespace,
                    description,
                    parameters,
                })
                .collect();
            Ok(Self {
                index: py.detach(|| Index::build(documents)),
            })
        })
    }

    fn __len__(&self) -> usize {
        self.index.len()
    }

    /// The best `limit` documents for `query` (BM25F) among `allowed`, as (number, score).
    #[pyo3(signature = (query, limit, allowed=None))]
    fn search(
        &self,
        py: Python<'_>,
        query: &str,
        limit: usize,
        allowed: Option<Vec<usize>>,
    ) -> PyResult<Vec<(usize, f32)>> {
        guard(|| {
            let mask = mask(allowed, self.index.len())?;
            Ok(py.detach(|| {
                self.index
                    .search(query, limit, &|n| mask.as_ref().is_none_or(|m| m[n]))
            }))
        })
    }

    /// Documents any of whose texts match `pattern`, in catalogue order, among `allowed`.
    #[pyo3(signature = (pattern, limit, allowed=None))]
    fn search_regex(
        &self,
        py: Python<'_>,
        pattern: &str,
        limit: usize,
        allowed: Option<Vec<usize>>,
    ) -> PyResult<Vec<usize>> {
        guard(|| {
            let mask = mask(allowed, self.index.len())?;
            py.detach(|| {
                self.index
                    .search_regex(pattern, limit, &|n| mask.as_ref().is_none_or(|m| m[n]))
            })
            .map_err(|e| argument(format!("invalid search pattern: {e}")))
        })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyToolSearchIndex>()
}
