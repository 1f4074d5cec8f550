/* svg.c - inline SVG for the report page (svg.h). */
#include "svg.h"

#include <math.h>
#include <stdarg.h>

void hp_xml_escape(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        const unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc(c < 0x20 && c != '\t' && c != '\n' && c != '\r' ? '?' : c, f);
        }
    }
}

void hp_xml_printf(FILE *f, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    hp_xml_escape(f, buf);
}

double hp_svg_map(const struct hp_svg_scale *s, double v)
{
    if (s->d1 == s->d0)
        return 0.5 * (s->r0 + s->r1);
    return s->r0 + (v - s->d0) * (s->r1 - s->r0) / (s->d1 - s->d0);
}

double hp_svg_step(double lo, double hi, int most)
{
    const double span = fabs(hi - lo);
    static const double nice[] = {1.0, 2.0, 5.0, 10.0};

    if (!(span > 0.0) || !isfinite(span))
        return 1.0;
    if (most < 2)
        most = 2;
    const double base = pow(10.0, floor(log10(span / most)));
    for (int i = 0; i < 4; i++)
        if (span / (nice[i] * base) <= most)
            return nice[i] * base;
    return 10.0 * base;
}

void hp_svg_open(FILE *f, double w, double h, const char *label)
{
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"fig\" viewBox=\"0 0 %.0f %.0f\" "
            "width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"",
            w, h, w, h);
    hp_xml_escape(f, label);
    fputs("\" font-family=\"sans-serif\" font-size=\"12\">\n"
          "<defs><pattern id=\"hp-hatch\" width=\"6\" height=\"6\" "
          "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
          "<rect width=\"3\" height=\"6\" fill=\"#000\" fill-opacity=\"0.28\"/></pattern></defs>\n",
          f);
}

void hp_svg_close(FILE *f)
{
    fputs("</svg>\n", f);
}

void hp_svg_rect(FILE *f, double x, double y, double w, double h, const char *fill,
                 const char *attrs, const char *tip)
{
    fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"", x, y,
            w > 0.0 ? w : 0.0, h > 0.0 ? h : 0.0);
    hp_xml_escape(f, fill);
    fprintf(f, "\"%s%s", attrs ? " " : "", attrs ? attrs : "");
    if (!tip) {
        fputs("/>\n", f);
        return;
    }
    fputs("><title>", f);
    hp_xml_escape(f, tip);
    fputs("</title></rect>\n", f);
}

void hp_svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *stroke,
                 double width, const char *attrs)
{
    fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"", x1, y1, x2, y2);
    hp_xml_escape(f, stroke);
    fprintf(f, "\" stroke-width=\"%.2f\"%s%s/>\n", width, attrs ? " " : "", attrs ? attrs : "");
}

void hp_svg_polyline(FILE *f, const double *x, const double *y, int n, const char *stroke,
                     const char *attrs)
{
    if (n < 2)
        return;
    fputs("<polyline fill=\"none\" stroke=\"", f);
    hp_xml_escape(f, stroke);
    fprintf(f, "\" stroke-width=\"1.8\"%s%s points=\"", attrs ? " " : "", attrs ? attrs : "");
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.2f,%.2f", i ? " " : "", x[i], y[i]);
    fputs("\"/>\n", f);
}

void hp_svg_circle(FILE *f, double cx, double cy, double r, const char *fill, const char *tip)
{
    fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"", cx, cy, r);
    hp_xml_escape(f, fill);
    if (!tip) {
        fputs("\"/>\n", f);
        return;
    }
    fputs("\"><title>", f);
    hp_xml_escape(f, tip);
    fputs("</title></circle>\n", f);
}

void hp_svg_text(FILE *f, double x, double y, const char *attrs, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(f, "<text x=\"%.2f\" y=\"%.2f\"%s%s>", x, y, attrs ? " " : "", attrs ? attrs : "");
    hp_xml_escape(f, buf);
    fputs("</text>\n", f);
}

/* Decimals that tell ticks `step` apart. */
static int decimals(double step)
{
    const int d = (int)ceil(-log10(step) - 1e-9);
    return d < 0 ? 0 : d > 6 ? 6 : d;
}

void hp_svg_axis_x(FILE *f, const struct hp_svg_scale *s, double at, const char *label,
                   double scale)
{
    const double step = hp_svg_step(s->d0, s->d1, 8);
    const int dec = decimals(step * scale);

    hp_svg_line(f, s->r0, at, s->r1, at, "#444", 1.0, NULL);
    for (double v = ceil(s->d0 / step - 1e-9) * step; v <= s->d1 + 1e-9 * step; v += step) {
        const double x = hp_svg_map(s, v);
        hp_svg_line(f, x, at, x, at + 4, "#444", 1.0, NULL);
        hp_svg_text(f, x, at + 16, "text-anchor=\"middle\" font-size=\"11\"", "%.*f", dec,
                    fabs(v * scale) < 1e-12 ? 0.0 : v * scale);
    }
    hp_svg_text(f, 0.5 * (s->r0 + s->r1), at + 32, "text-anchor=\"middle\"", "%s", label);
}

void hp_svg_axis_y(FILE *f, const struct hp_svg_scale *s, double at, double right,
                   const char *label, double scale)
{
    const double step = hp_svg_step(s->d0, s->d1, 5);
    const int dec = decimals(step * scale);
    const double mid = 0.5 * (s->r0 + s->r1);

    hp_svg_line(f, at, s->r0, at, s->r1, "#444", 1.0, NULL);
    for (double v = ceil(s->d0 / step - 1e-9) * step; v <= s->d1 + 1e-9 * step; v += step) {
        const double y = hp_svg_map(s, v);
        if (right > at)
            hp_svg_line(f, at, y, right, y, "#ddd", 1.0, NULL);
        hp_svg_line(f, at - 4, y, at, y, "#444", 1.0, NULL);
        hp_svg_text(f, at - 6, y + 4, "text-anchor=\"end\" font-size=\"11\"", "%.*f", dec,
                    fabs(v * scale) < 1e-12 ? 0.0 : v * scale);
    }
    fprintf(f,
            "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" transform=\"rotate(-90 %.2f "
            "%.2f)\">",
            at - 44, mid, at - 44, mid);
    hp_xml_escape(f, label);
    fputs("</text>\n", f);
}
