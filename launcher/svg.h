/* svg.h - inline SVG for the report page (jobreport.h): shapes and text written to a stdio
 * stream, every piece of text escaped for XML, coordinates in a short fixed form, linear
 * scales with "nice" tick steps and labelled axes.
 *
 * Nothing here allocates or fails: a write error shows in ferror(f), which the caller checks
 * once at the end (hp_out_close). `attrs` arguments are extra attributes written as they are
 * (constant strings of the caller's, never user text); NULL for none. Colours are CSS colours.
 */
#ifndef HP_SVG_H
#define HP_SVG_H

#include <stdio.h>

/* Write s with &, <, >, " and ' escaped, for text and attribute values alike (NULL: nothing).
 * Control characters that XML 1.0 does not allow (all below 0x20 but tab, newline, return)
 * become '?'. */
void hp_xml_escape(FILE *f, const char *s);

/* printf into the stream, the result escaped as hp_xml_escape does (at most 4 KiB). */
void hp_xml_printf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A linear map from the data range [d0, d1] to the drawing range [r0, r1]. */
struct hp_svg_scale {
    double d0, d1, r0, r1;
};

/* v mapped by s (d0 == d1: the middle of [r0, r1]). */
double hp_svg_map(const struct hp_svg_scale *s, double v);

/* A tick step of 1, 2 or 5 x 10^k giving at most `most` (>= 2) steps over [lo, hi]; 1 when
 * the range is empty. */
double hp_svg_step(double lo, double hi, int most);

/* <svg> with viewBox 0 0 w h, drawn at its width up to the page's (CSS class "fig"), with
 * an accessible label; the hatch pattern "hp-hatch" (backward passes) is defined in it. */
void hp_svg_open(FILE *f, double w, double h, const char *label);
void hp_svg_close(FILE *f);

/* A rectangle; `tip` (may be NULL) becomes its <title>, shown on hover. */
void hp_svg_rect(FILE *f, double x, double y, double w, double h, const char *fill,
                 const char *attrs, const char *tip);
void hp_svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *stroke,
                 double width, const char *attrs);
/* A polyline through n points (n < 2: nothing). */
void hp_svg_polyline(FILE *f, const double *x, const double *y, int n, const char *stroke,
                     const char *attrs);
void hp_svg_circle(FILE *f, double cx, double cy, double r, const char *fill, const char *tip);

/* Text at (x, y), its content from fmt (escaped). attrs e.g. "text-anchor=\"end\"". */
void hp_svg_text(FILE *f, double x, double y, const char *attrs, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* An x axis along y = `at` over the scale's drawing range: line, ticks and their labels below,
 * the label centred under them; `scale` multiplies the tick values shown (100 for percent). */
void hp_svg_axis_x(FILE *f, const struct hp_svg_scale *s, double at, const char *label,
                   double scale);
/* A y axis along x = `at`: ticks and labels to its left, the label turned up the side; grid
 * lines across to x = `right` when right > at. */
void hp_svg_axis_y(FILE *f, const struct hp_svg_scale *s, double at, double right,
                   const char *label, double scale);

#endif
