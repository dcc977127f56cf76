/**
 * `AzureWebJobs.<name>.Disabled`: the Azure host does not start a disabled function's trigger
 * (no listener, no timer, 404 on its route). App settings are case-insensitive in Azure, and the
 * host reads "true" (any case) or "1" as disabled; anything else leaves the function enabled.
 */
export function disabledSettingName(functionName: string): string {
  return `AzureWebJobs.${functionName}.Disabled`;
}

export function isFunctionDisabled(functionName: string, settings: NodeJS.ProcessEnv): boolean {
  const wanted = disabledSettingName(functionName).toLowerCase();
  for (const [name, value] of Object.entries(settings)) {
    if (name.toLowerCase() !== wanted || value === undefined) continue;
    const text = value.trim().toLowerCase();
    if (text === 'true' || text === '1') return true;
  }
  return false;
}
