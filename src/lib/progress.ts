/** A text progress bar for the CLI's progress lines: `[#####-----] 12/40`. */
export function progressBar(done: number, total: number, width = 24): string {
  const filled = total === 0 ? width : Math.min(width, Math.round((done / total) * width));
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${done}/${total}`;
}
