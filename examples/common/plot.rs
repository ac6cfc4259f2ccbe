//! Line charts as PNG files (plotters' bitmap backend, encoded by `image`), for the MNIST
//! example's loss curve and the soak test's memory curves. Axis labels need a TrueType font,
//! loaded at run time from the usual system places; without one the chart is drawn unlabelled.

use std::path::Path;

/// Registers a system sans-serif font with plotters; false when none is found.
pub fn register_font() -> bool {
    let candidates = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/Library/Fonts/Arial.ttf",
        "/System/Library/Fonts/Supplemental/Arial.ttf",
        "C:\\Windows\\Fonts\\arial.ttf",
    ];
    for c in candidates {
        if let Ok(bytes) = std::fs::read(c) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, bytes).is_ok() {
                return true;
            }
        }
    }
    false
}

/// One line of a chart.
pub struct Series {
    /// Its points, in x order.
    pub points: Vec<(f64, f64)>,
    /// Its colour (RGB).
    pub color: (u8, u8, u8),
    /// Its stroke width in pixels.
    pub width: u32,
}

/// Draws `series` on shared axes (y from 0 to 5% above the largest value) into a PNG.
pub fn line_chart(title: &str, x_desc: &str, y_desc: &str, series: &[Series], path: &Path) -> Result<(), String> {
    use plotters::prelude::*;
    let (w, h) = (900u32, 500u32);
    let mut buf = vec![0u8; (w * h * 3) as usize];
    {
        let labels = register_font();
        let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
        let (x0, x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
        let (x0, x1) = if x0.is_finite() && x1 > x0 { (x0, x1) } else { (0.0, 1.0) };
        // Non-finite values (a float16 loss that overflowed, a step the GradScaler skipped)
        // are left out of the range and of the lines.
        let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).filter(|y| y.is_finite());
        let top = ys.fold(0.0f64, f64::max).max(1e-3) * 1.05;
        let mut builder = ChartBuilder::on(&root);
        builder.margin(20);
        if labels {
            builder.caption(title, ("sans-serif", 22)).x_label_area_size(40).y_label_area_size(60);
        }
        let mut chart = builder.build_cartesian_2d(x0..x1, 0f64..top).map_err(|e| e.to_string())?;
        let mut mesh = chart.configure_mesh();
        if labels {
            mesh.x_desc(x_desc).y_desc(y_desc);
        } else {
            mesh.disable_x_axis().disable_y_axis();
        }
        mesh.draw().map_err(|e| e.to_string())?;
        for s in series {
            let (r, g, b) = s.color;
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied().filter(|p| p.1.is_finite()),
                    RGBColor(r, g, b).stroke_width(s.width),
                ))
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    let img = image::RgbImage::from_raw(w, h, buf).ok_or("bitmap size")?;
    img.save(path).map_err(|e| format!("{}: {e}", path.display()))
}
