// uPlot formats numbers with `new Intl.NumberFormat(navigator.language)` when it loads; some
// browsers report a POSIX tag ("en-US@posix") that Intl refuses, which would break the page.
// Imported before uPlot: falls back to the browser's default locale when the tag is invalid.
try {
  new Intl.NumberFormat(navigator.language);
} catch {
  Object.defineProperty(navigator, 'language', { value: new Intl.NumberFormat().resolvedOptions().locale, configurable: true });
}
export {};
