//! Reads a component's top-level imports and exports without compiling it, so that a component
//! with any import, or exporting the wrong world or version, is refused before compilation.

use crate::error::PolicyError;
use serde::Serialize;
use wasmparser::{Parser, Payload};

/// What a component declares at its top level.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ComponentSurface {
    /// Top-level import names.
    pub imports: Vec<String>,
    /// Top-level export names.
    pub exports: Vec<String>,
}

/// Lists the top-level imports and exports of a component binary.
pub fn component_surface(bytes: &[u8]) -> Result<ComponentSurface, PolicyError> {
    if !Parser::is_component(bytes) {
        return Err(PolicyError::NotAComponent(
            "missing the component header (a core module or other bytes)".to_owned(),
        ));
    }
    let mut surface = ComponentSurface::default();
    // Nested modules and components appear inline in the payload stream; only depth 0 is the
    // component's own surface.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| PolicyError::NotAComponent(e.message().to_owned()))?;
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    let import =
                        import.map_err(|e| PolicyError::NotAComponent(e.message().to_owned()))?;
                    surface.imports.push(import.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    let export =
                        export.map_err(|e| PolicyError::NotAComponent(e.message().to_owned()))?;
                    surface.exports.push(export.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    Ok(surface)
}
