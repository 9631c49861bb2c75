/* A small SVG line chart: lineChart(container, {times, series: [{name, values, total}], unit}) draws
   one path per series over the times (ms), with a y axis from 0 to the largest value, time ticks and
   a legend (a series marked total is dark and dashed). The svg carries data-points (how many times
   it drew) and each path data-series (its name). */
"use strict";

const TOTAL_COLOR = "#17203a";
const PALETTE = ["#2f6fdb", "#d64545", "#1f9d55", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563",
                 "#65a30d", "#b45309"];

function niceMax(value, divisions) {
  // the smallest 1, 2, 2.5 or 5 times a power of ten that, times `divisions`, reaches `value`
  const wanted = Math.max(value, 1) / divisions;
  const power = Math.pow(10, Math.floor(Math.log10(wanted)));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (wanted <= step * power) return step * power * divisions;
  }
  return 10 * power * divisions;
}

function shortNumber(value) {
  if (value >= 1e6) return (value / 1e6).toFixed(value >= 1e7 ? 0 : 1) + "M";
  if (value >= 1e3) return (value / 1e3).toFixed(value >= 1e4 ? 0 : 1) + "k";
  return String(Math.round(value * 10) / 10);
}

function clockTime(ms) {
  return new Date(ms).toLocaleTimeString([], {hour: "2-digit", minute: "2-digit", second: "2-digit"});
}

function svgElement(name, attributes) {
  const element = document.createElementNS("http://www.w3.org/2000/svg", name);
  for (const [key, value] of Object.entries(attributes || {})) element.setAttribute(key, value);
  return element;
}

function lineChart(container, {times, series, unit}) {
  const width = Math.max(320, container.clientWidth || 600), height = 220;
  const left = 52, right = 12, top = 10, bottom = 24;
  const svg = svgElement("svg", {viewBox: `0 0 ${width} ${height}`, "data-points": times.length,
                                 role: "img"});
  const all = series.flatMap((s) => s.values.filter((v) => v !== null));
  const yMax = niceMax(Math.max(0, ...all), 4);
  const t0 = times.length ? times[0] : 0, t1 = times.length > 1 ? times[times.length - 1] : t0 + 1;
  const x = (t) => left + (width - left - right) * (t - t0) / Math.max(1, t1 - t0);
  const y = (v) => top + (height - top - bottom) * (1 - v / yMax);
  for (let i = 0; i <= 4; i++) {
    const value = yMax * i / 4;
    svg.appendChild(svgElement("line", {class: "gridline", x1: left, x2: width - right, y1: y(value), y2: y(value)}));
    const label = svgElement("text", {x: left - 6, y: y(value) + 4, "text-anchor": "end"});
    label.textContent = shortNumber(value);
    svg.appendChild(label);
  }
  svg.appendChild(svgElement("line", {class: "axis", x1: left, x2: left, y1: top, y2: height - bottom}));
  svg.appendChild(svgElement("line", {class: "axis", x1: left, x2: width - right, y1: height - bottom,
                                      y2: height - bottom}));
  if (times.length) {
    for (const [t, anchor] of [[t0, "start"], [t0 + (t1 - t0) / 2, "middle"], [t1, "end"]]) {
      const label = svgElement("text", {x: x(t), y: height - 6, "text-anchor": anchor});
      label.textContent = clockTime(t);
      svg.appendChild(label);
    }
  }
  const unitLabel = svgElement("text", {x: left + 6, y: top + 10});
  unitLabel.textContent = unit;
  svg.appendChild(unitLabel);
  const legend = document.createElement("div");
  legend.className = "legend";
  series.forEach((s, index) => {
    const color = s.total ? TOTAL_COLOR : PALETTE[index % PALETTE.length];
    let d = "", pen = "M";
    s.values.forEach((value, i) => {
      if (value === null || value === undefined) { pen = "M"; return; }
      d += `${pen}${x(times[i]).toFixed(1)},${y(value).toFixed(1)} `;
      pen = "L";
    });
    svg.appendChild(svgElement("path", {class: s.total ? "line total" : "line", d: d.trim(), stroke: color, "data-series": s.name}));
    const entry = document.createElement("span");
    entry.style.setProperty("--swatch", color);
    entry.textContent = s.name;
    legend.appendChild(entry);
  });
  container.replaceChildren(svg, legend);
  if (!times.length) {
    const note = document.createElement("div");
    note.className = "empty";
    note.textContent = "Collecting samples…";
    container.appendChild(note);
  }
}
